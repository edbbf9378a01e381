"""Recording beside two CPU hogs (issue 21): `tokenreel record` in its own process, against the
simulator, with two busy loops taking both cores, and every run held against what the simulator
really sent (simulator/tokenreel/simulator/truth.py): a busy host may slow the recording, never bend its times."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, replace

import pytest

from tests.test_cli import run_cli, write_config
from tokenreel import assets
from tokenreel.analysis.metrics import last_token_index, run_metrics
from tokenreel.session import archive
from tokenreel.session.model import Session
from tokenreel.simulator.profiles import SEED_LADDER
from tokenreel.simulator.sent import SentStream
from tokenreel.simulator.server import running
from tokenreel.simulator.truth import RunTruth, fetch_sent, pair, run_truth, session_truth

HOGS = 2
TIME_SCALE = 0.2  # bf16 at 486 tok/s: a run takes ~0.3 s
MAX_TOKENS = 64
PROMPTS = ("code-1", "prose-1")
WARMUP, REPEATS = 1, 2
TTFT_MS = 0.3  # the recorder's targets beside two hogs (bench/recorder_fidelity.py)
DECODE_PCT = 0.05


@dataclass(frozen=True)
class Recording:
    record: subprocess.CompletedProcess[str]
    report: subprocess.CompletedProcess[str]
    session: Session
    sent: dict[str, list[SentStream]]
    truths: list[RunTruth]
    hogs_ran_throughout: bool

    def errors(self) -> str:
        """Every completed run's errors, one line each, for the assertion messages."""
        return "\n".join(truth.line() for truth in self.truths)


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """Three arms x two prompts, one warmup and two repeats each, recorded beside two hogs."""
    tmp = tmp_path_factory.mktemp("busy-host")
    suite = tmp / "two.jsonl"
    lines = assets.file("prompts", "ladder4.jsonl").read_text(encoding="utf-8").splitlines()
    suite.write_text("\n".join(line for line in lines if json.loads(line)["id"] in PROMPTS) + "\n", encoding="utf-8")
    session_path = tmp / "busy.json"
    hogs: list[subprocess.Popen[bytes]] = []
    try:
        with running(SEED_LADDER, TIME_SCALE) as cluster:
            config = write_config(
                tmp / "busy.toml", cluster, max_tokens=MAX_TOKENS, warmup=WARMUP, repeats=REPEATS, prompts=str(suite)
            )
            for _ in range(HOGS):
                hogs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
            record = run_cli("record", "--config", config, "--out", session_path)
            alive = all(hog.poll() is None for hog in hogs)
            sent = {p.id: fetch_sent(cluster.root_url(p.id), cluster.control_headers) for p in SEED_LADDER}
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()
    session = archive.load(session_path)
    report = run_cli("report", session_path, "--format", "json")
    return Recording(record, report, session, sent, session_truth(session, sent), alive)


def test_every_run_has_the_times_the_simulator_sent(busy: Recording) -> None:
    assert busy.hogs_ran_throughout
    measured = [truth for truth in busy.truths if not truth.warmup]
    expected = len(SEED_LADDER) * len(PROMPTS) * REPEATS
    assert len(measured) == expected, f"{len(measured)} of {expected} measured runs completed:\n{busy.record.stderr}"
    # a run whose bytes the server's kernel sent after its write mixes that delay into its errors
    # (truth.py): not the recorder's, and rare; the rest are held to the recorder's targets
    on_time = [t for t in measured if not t.sent_late]
    assert len(on_time) >= len(measured) / 2, busy.errors()
    late = [t for t in on_time if not t.first_shared and abs(t.ttft_error_ms) > TTFT_MS]
    # A run whose first read held every token has no decode interval, and the recorder gives it no
    # figure (a drafter's 64 tokens take about 30 ms here: a starved reader can find all of them
    # waiting); any other run without a figure, or with one off, is the recorder's fault.
    undecoded = {(r.arm, r.prompt, r.index) for r in busy.session.runs if run_metrics(r).decode_tokens == 0}
    whole = [t for t in on_time if (t.arm, t.prompt, t.index) in undecoded]
    assert all(t.decode_error_pct is None for t in whole) and len(whole) <= len(measured) // 4, busy.errors()
    off = [t for t in on_time if t not in whole and (t.decode_error_pct is None or abs(t.decode_error_pct) > DECODE_PCT)]
    assert not late and not off, (
        f"{len(late)} runs with TTFT off by more than {TTFT_MS} ms, {len(off)} with decode off by more than"
        f" {DECODE_PCT}% (first_shared runs' TTFT is late by design):\n{busy.errors()}"
    )


def test_record_beside_the_hogs_keeps_every_cell(busy: Recording) -> None:
    assert busy.record.returncode == 0, f"{busy.record.stdout}\n{busy.record.stderr}\n{busy.errors()}"
    assert busy.report.returncode == 0, busy.report.stderr
    report = json.loads(busy.report.stdout)
    cells = {(cell["arm"], cell["prompt"]) for cell in report["cells"]}
    assert report["missing_cells"] == [] and cells == {(p.id, prompt) for p in SEED_LADDER for prompt in PROMPTS}, (
        f"missing cells: {report['missing_cells']}\n{busy.errors()}"
    )


def test_a_run_is_never_paired_with_another_arms_stream(busy: Recording) -> None:
    bf16, nvfp4 = SEED_LADDER[0].id, SEED_LADDER[1].id
    swapped = {**busy.sent, bf16: busy.sent[nvfp4], nvfp4: busy.sent[bf16]}
    with pytest.raises(ValueError, match=rf"^{bf16} / .*: its endpoint logged no stream "):
        session_truth(busy.session, swapped)


def test_a_late_first_token_or_a_late_last_one_is_caught(busy: Recording) -> None:
    """The checks above can fail: the same run with its first token 1 ms past the server's
    write of it, or its last token 5 ms past the end of the stream, is out of bounds. A run whose
    first token was read alone is taken, the kind the TTFT check holds; on a box so loaded that
    every first token shared its read (seen beside three more hogs), the first ok run: the
    shifted times are measured against the server's writes alike."""
    ok = [(run, stream) for arm in (p.id for p in SEED_LADDER) for run, stream in pair(arm, busy.session.runs, busy.sent[arm])
          if run.status == "ok" and run.clock is not None]
    run, stream = min(ok, key=lambda pair: pair[0].clock is not None and pair[0].clock.first_shared)
    assert run.send_monotonic_ns is not None
    truth = run_truth(run, stream)
    shift = round((1.0 - truth.ttft_vs_after_ms) * 1e6)  # 1 ms after the first token write's after stamp
    late_first = run_truth(replace(run, send_monotonic_ns=run.send_monotonic_ns + shift), stream)
    assert late_first.ttft_error_ms == pytest.approx(1.0, abs=1e-6), late_first.line()
    chunks, last = run.chunks, last_token_index(run.chunks)
    assert last is not None
    past_end = stream.after_ns[-1] - run.send_monotonic_ns + 5_000_000
    late_last = replace(run, chunks=replace(chunks, t_ns=[*chunks.t_ns[:last], *[past_end] * (len(chunks) - last)]))
    slow = run_truth(late_last, stream).decode_error_pct
    assert slow is not None and slow < -DECODE_PCT, run_truth(late_last, stream).line()
