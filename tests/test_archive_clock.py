"""The clock fields of the archive (issue 13): round trip, old sessions, validation, and what the
ladder and report make of client_busy runs."""

from __future__ import annotations

import csv
import io
import statistics
from pathlib import Path

import orjson
import pytest

from tests import session_factory as factory
from tokenreel.analysis.figures import figure
from tokenreel.analysis.ladder import build_cells, missing_cells
from tokenreel.analysis.metrics import run_metrics
from tokenreel.renderer.options import RenderOptions
from tokenreel.renderer.render_plan import build_plan
from tokenreel.report import build_report, render_report
from tokenreel.session import archive
from tokenreel.session.json_form import session_to_dict
from tokenreel.session.model import CLIENT_BUSY_P99_MS, ArchiveError, Clock, Session
from tokenreel.session.validate import from_dict

SEED = Path(__file__).resolve().parent.parent / "sessions" / "seed-ladder-demo.json"
MS = factory.MS


def clocked_session() -> Session:
    """Three runs of one arm: kernel clock, kernel clock busy with its first token read alone,
    kernel clock busy with its first token read together with the next (same time)."""
    runs = [factory.stream(factory.words(6), 100 * MS, 10 * MS) for _ in range(3)]
    shared = runs[2]
    shared.t_ns[1] = shared.t_ns[2]  # the first token got the second's read time
    session = factory.session([("a", "A", runs)])
    delays = ([80] * 8, [80] * 7 + [9000], [5000] * 8)
    for run, delay, (busy, first_shared) in zip(session.runs, delays, ((False, False), (True, False), (True, True)), strict=False):
        run.chunks.client_delay_us = delay
        run.clock = Clock("kernel", "", 0.08, max(delay) / 1000 if busy else 0.08, max(delay) / 1000, first_shared)
        run.client_busy = busy
    return session


def test_clock_fields_round_trip(tmp_path: Path) -> None:
    session = clocked_session()
    session.runs[0].clock = Clock("user", "the wall clock stepped +3.000 ms during the run (NTP?)")
    session.runs[0].client_busy, session.runs[0].chunks.client_delay_us = None, []
    session.settings.client_busy_p99_ms = 1.5
    path = tmp_path / "s.json"
    archive.save(session, path)
    loaded = archive.load(path)
    assert loaded.settings.client_busy_p99_ms == 1.5
    assert [(r.clock, r.client_busy, r.chunks.client_delay_us) for r in loaded.runs] == [
        (r.clock, r.client_busy, r.chunks.client_delay_us) for r in session.runs
    ]
    assert "client_delay_us" not in orjson.loads(path.read_bytes())["runs"][0]["chunks"]  # empty: left out


def test_sessions_without_the_clock_still_load_and_save(tmp_path: Path) -> None:
    session = archive.load(SEED)
    assert all(r.clock is None and r.client_busy is None and r.chunks.client_delay_us == [] for r in session.runs)
    assert session.settings.client_busy_p99_ms == CLIENT_BUSY_P99_MS
    archive.save(session, tmp_path / "again.json")
    assert archive.load(tmp_path / "again.json").runs == session.runs
    assert "timed by their user-space read stamps: not archived" in render_report(session, "md")


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (lambda run: run["chunks"].update(client_delay_us=[1]), "runs[0].chunks.client_delay_us", "has 1 entries"),
        (lambda run: run["chunks"].update(client_delay_us=[-1] * len(run["chunks"]["t_ns"])),
         "runs[0].chunks.client_delay_us[0]", "microseconds"),
        (lambda run: run["clock"].update(source="tsc"), "runs[0].clock.source", "must be one of kernel, user"),
        (lambda run: run["clock"].update(delay_p99_ms=float("nan")), "runs[0].clock.delay_p99_ms", "finite"),
        (lambda run: run.update(client_busy="yes"), "runs[0].client_busy", "true or false"),
    ],
)
def test_bad_clock_fields_name_the_field(change, field: str, problem: str) -> None:
    data = session_to_dict(clocked_session())
    change(data["runs"][0])
    with pytest.raises(ArchiveError) as caught:
        from_dict(data, "s.json")
    assert caught.value.field == field and problem in caught.value.problem


def test_client_busy_kernel_runs_stay_and_a_shared_first_read_leaves_only_its_ttft() -> None:
    """Issue 21: a busy recorder does not move kernel receive times, so its runs keep every figure;
    only a first token read together with later ones has a later packet's time: no TTFT."""
    session = clocked_session()
    [cell] = build_cells(session)
    assert (cell.runs, cell.client_busy, cell.client_busy_left_out, cell.ttft_left_out, cell.clock) == (3, 2, 0, 1, "kernel")
    decode = sorted(run_metrics(r).decode_tok_s for r in session.runs)
    assert cell.decode_tok_s == decode[1]  # the median of all three runs
    assert cell.ttft_s == statistics.median(run_metrics(r).ttft_s for r in session.runs[:2])
    markdown = render_report(session, "md")
    assert "Clock: all 3 measured runs timed by the kernel's receive time" in markdown
    assert "a / p1 / run 1: client delay p99 9.0 ms, max 9.0 ms; in the figures\n" in markdown
    assert ("TTFT left out of TTFT figures for a / p1 / run 2: the first token was read together with later"
            " ones") in markdown
    report = build_report(session)
    assert [(r["in_figures"], r["ttft_in_figures"]) for r in report["clocks"]] == [(True, True), (True, True), (True, False)]
    assert report["latency"]["cells"][0]["ttft_ms"]["n"] == 2 and report["latency"]["cells"][0]["itl_ms"]["n"] > 0


def test_a_run_read_whole_in_one_read_is_left_out_of_decode_and_said() -> None:
    """A recorder starved for a whole decode gets the answer in one read (the kernel merges the
    queued packets and keeps the last one's time): no decode interval. Its cell still counts it,
    so every view marks the decode and TPOT it is left out of, and says why."""
    session = clocked_session()
    whole = session.runs[2].chunks
    last = max(i for i, n in enumerate(whole.tokens) if n)
    for i in range(len(whole.t_ns)):
        if whole.tokens[i]:
            whole.t_ns[i] = whole.t_ns[last]
    [cell] = build_cells(session)
    assert run_metrics(session.runs[2]).decode_tok_s is None
    assert (cell.runs, cell.decode_left_out, cell.ttft_left_out) == (3, 1, 1)
    assert cell.decode_tok_s == statistics.median(run_metrics(r).decode_tok_s for r in session.runs[:2])
    report = build_report(session)
    assert [r["decode_in_figures"] for r in report["clocks"]] == [True, True, False]
    markdown = render_report(session, "md")
    row = next(line for line in markdown.splitlines() if line.startswith("| a | p1 |"))
    decode, tpot = figure(cell.decode_tok_s), figure(cell.tpot_ms, 2)
    assert f"| {tpot}‡ | {decode}‡ |" in row
    note = "‡ decode and TPOT leave out runs whose whole answer arrived in one read (no decode interval)"
    assert note in markdown and "† the TTFT leaves out runs whose first token was read together" in markdown
    assert "Decode left out of decode and TPOT figures for a / p1 / run 2: the whole answer arrived in one read" in markdown
    html = render_report(session, "html")
    assert f"{decode}‡" in html and note in html
    [csv_row] = csv.DictReader(io.StringIO(render_report(session, "csv")))
    assert csv_row["decode_left_out"] == "1" and csv_row["ttft_left_out"] == "1"
    clocked = render_report(clocked_session(), "md")  # no such run: no mark, no note
    assert "‡" not in clocked and "Decode left out" not in clocked


def test_a_cell_whose_every_run_came_in_one_read_is_not_raced_and_the_render_says_why() -> None:
    session = factory.session([(arm, arm.upper(), [factory.stream(factory.words(6), 100 * MS, 10 * MS) for _ in range(3)])
                               for arm in ("a", "b")])
    for run in session.runs_of("a", "p1"):
        whole = run.chunks
        last = max(i for i, n in enumerate(whole.tokens) if n)
        whole.t_ns[:] = [whole.t_ns[last] if n else t for t, n in zip(whole.t_ns, whole.tokens, strict=True)]
    cell, other = build_cells(session)
    assert (cell.arm, cell.runs, cell.decode_left_out, cell.decode_tok_s) == ("a", 3, 3, None) and other.decode_left_out == 0
    with pytest.raises(ValueError, match=r"arm 'a' has no usable measured run of prompt 'p1' \(each of its counted"
                                         r" runs got its whole answer in one read, so none has a decode interval"):
        build_plan(session, RenderOptions(size="640x360"))


def user_clock_busy(session: Session) -> Session:
    """The same runs as if timed by the user-space clock (another platform): a busy client's
    stamps are then as late as it was."""
    for run in session.runs:
        run.clock = Clock("user", "no kernel receive times on this platform")
    return session


def test_a_cell_whose_user_clock_runs_were_all_late_is_missing_with_the_reason() -> None:
    session = user_clock_busy(clocked_session())
    session.runs = session.runs[2:]
    [missing] = missing_cells(session)
    assert missing.reason == ("all 1 run client busy: the recorder woke late on the user-space clock (no kernel"
                              " receive times on this platform), so its times are late too")
    session = clocked_session()
    session.runs = session.runs[2:]
    assert missing_cells(session) == []  # the same run on the kernel clock counts


def test_resume_records_late_user_clock_runs_again_not_exact_ones() -> None:
    from tokenreel.recorder.todo import runs_todo

    for session, todo in ((clocked_session(), []), (user_clock_busy(clocked_session()), [1, 2])):
        for run in session.runs:
            run.warmup = False
        session.settings.warmup, session.settings.repeats = 0, 3
        assert [index for _, index in runs_todo(session, session.arms[0])] == todo
