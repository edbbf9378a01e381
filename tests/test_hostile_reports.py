"""Hostile sessions against report, plot, compare, the HTML page and render (issue 25): huge token
counts cost memory and time by events, not tokens; huge figures format; the page runs only its
own script; bidi controls never reach a reader raw; a killed render worker is one line.

Commands run as real processes on real files; time and peak RSS are the child's own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import session_factory as sf
from tests.test_html_report import offline_problems, open_page, seek, shown
from tokenreel.analysis.latency import distribution
from tokenreel.session import archive
from tokenreel.session.model import Chunks

REPO = Path(__file__).resolve().parents[1]
TOKENREEL = [sys.executable, "-m", "tokenreel"]
MIB = 1024 * 1024
BIDI = "click \u202egnp.exe \u2066x\u2069 \u200f\u061c"
BIDI_CHARS = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def tokenreel(*args: object, cwd: Path, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run `tokenreel ARGS` in its own process: (result, its CPU seconds, its peak RSS in MiB).
    RUSAGE_CHILDREN is the largest of all children so far, so each call measures in a fresh
    Python that runs only this one command. CPU seconds, not wall: the suite runs other tests
    beside this one on the same cores, which stretch the wall time (13 s seen for 5 s of work)."""
    probe = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:]); use = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(p.returncode, use.ru_utime + use.ru_stime, use.ru_maxrss, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, *TOKENREEL, *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    *lines, figures = done.stderr.rstrip("\n").split("\n")
    code, cpu, rss_kib = figures.split()
    result = subprocess.CompletedProcess(done.args, int(code), done.stdout, "\n".join(lines))
    return result, float(cpu), int(rss_kib) / 1024


def assert_one_line(result: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


# --- memory and time follow events, not tokens ------------------------------------------------------


def huge_run(events: int, gap_ms: int) -> Chunks:
    """A role-only event, then `events` events of 1,000,000 tokens each, gap_ms apart."""
    chunks = Chunks()
    chunks.append(50 * sf.MS, 0)
    for i in range(events):
        chunks.append((100 + i * gap_ms) * sf.MS, 1_000_000, content="x")
    return chunks


@pytest.fixture(scope="module")
def huge_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3,000 events of 1 M tokens each: two arms, three runs of 500 events (3 * 10^9 tokens)."""
    path = tmp_path_factory.mktemp("huge") / "huge.json"
    arms = [("plain", "Plain", [huge_run(500, 10) for _ in range(3)]), ("spec", "Spec", [huge_run(500, 7) for _ in range(3)])]
    archive.save(sf.session(arms), path)
    return path


@pytest.mark.parametrize("command", [
    ("report", "--format", "md", "-o", "out.md"),
    ("report", "--format", "json", "-o", "out.json"),
    ("report", "--format", "csv", "-o", "out.csv"),
    ("report", "--format", "html", "-o", "out.html"),
    ("plot", "--out", "charts"),
], ids=["md", "json", "csv", "html", "plot"])
def test_three_billion_tokens_report_in_seconds_and_little_memory(huge_session: Path, tmp_path: Path, command: tuple) -> None:
    name, *options = command
    result, cpu, rss = tokenreel(name, huge_session, *options, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert cpu < 10 and rss < 300, f"{name} {options}: {cpu:.1f} CPU s, {rss:.0f} MiB peak RSS"
    print(f"{name} {' '.join(options)}: {cpu:.1f} CPU s, {rss:.0f} MiB peak RSS")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e6, allow_nan=False, allow_subnormal=False) | st.sampled_from([0.0, 1.0, 2.5]),
                          st.integers(0, 40)), max_size=30))
def test_weighted_percentiles_equal_the_expanded_computation(pairs: list[tuple[float, int]]) -> None:
    expanded = [value for value, count in pairs for _ in range(count)]
    d = distribution(pairs)
    assert d.n == len(expanded)
    if expanded:
        p50, p90, p99 = (float(v) for v in numpy.percentile(numpy.asarray(expanded, dtype=float), [50, 90, 99]))
        assert (d.min, d.p50, d.p90, d.p99, d.max) == (min(expanded), p50, p90, p99, max(expanded))  # bit for bit
    else:
        assert d.p50 is None


# --- figures of 1e27 and more ---------------------------------------------------------------------


def _slow() -> Chunks:
    """One token, then another just short of the archive's one-week bound: ~1.7e-6 tok/s."""
    chunks = Chunks()
    chunks.append(100 * sf.MS, 1, content="a")
    chunks.append(604_799 * 10**9, 1, content="b")
    return chunks


def _burst(events: int) -> Chunks:
    """`events` million-token events within one nanosecond: ~2e19 tok/s."""
    chunks = Chunks()
    chunks.append(100 * sf.MS, 1, content="a")
    for _ in range(events):
        chunks.append(100 * sf.MS, 1_000_000)
    chunks.append(100 * sf.MS + 1, 1_000_000, content="b")
    return chunks


def test_huge_temperature_and_clock_delay_format_in_every_report(tmp_path: Path) -> None:
    session = sf.session([("plain", "Plain", [huge_run(3, 10)])])
    session.settings.temperature = 1e27
    archive.save(session, tmp_path / "s.json")
    data = json.loads((tmp_path / "s.json").read_text())  # the delay as a hand-edited file holds it
    for run in data["runs"]:
        run["clock"] = {"source": "kernel", "reason": "", "delay_p50_ms": 1e27, "delay_p99_ms": 1e300, "delay_max_ms": 1e300}
    (tmp_path / "s.json").write_text(json.dumps(data))
    for fmt in ("md", "json", "csv", "html"):
        result, _, _ = tokenreel("report", "s.json", "--format", fmt, "-o", f"out.{fmt}", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    page = (tmp_path / "out.html").read_text()
    assert "temperature 1.0e+27" in page and "client delay p99 1.00e+300 ms" in page


def test_a_delta_of_1e27_percent_is_judged_not_a_crash(tmp_path: Path) -> None:
    archive.save(sf.session([("plain", "Plain", [_slow(), _slow()])]), tmp_path / "a.json")
    archive.save(sf.session([("plain", "Plain", [_burst(20_000), _burst(20_000)])]), tmp_path / "b.json")
    result, _, _ = tokenreel("compare", "a.json", "b.json", cwd=tmp_path)
    assert result.returncode == 1, result.stderr  # 1 prompt: judged from the runs, which agree exactly on each side
    assert "| [+1.21e+27 %, +1.21e+27 %] | **faster**" in result.stdout and "Traceback" not in result.stderr


def test_an_unexpected_error_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """A bug (here: the report builder raising) is exit 2, never 1, which means "not reproduced"."""
    archive.save(sf.session([("plain", "Plain", [huge_run(3, 10)])]), tmp_path / "s.json")
    code = ("import sys, tokenreel.report.data as d\n"
            "def boom(*a, **k): raise KeyError('boom')\n"
            "d.build_report = boom\n"
            "import tokenreel.report as r; r.build_report = boom\n"
            "from tokenreel.cli import app; app(prog_name='tokenreel')\n")
    result = subprocess.run([sys.executable, "-c", code, "report", "s.json"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert_one_line(result)
    assert "unexpected error: KeyError" in result.stderr


# --- the page runs only its own script ----------------------------------------------------------


def test_the_page_allows_its_script_by_hash_and_still_replays(browser, tmp_path: Path) -> None:  # noqa: F811
    session = sf.session([("plain", "Plain", [sf.stream(sf.words(20), 100 * sf.MS, 10 * sf.MS)])])
    archive.save(session, tmp_path / "s.json")
    result, _, _ = tokenreel("report", "s.json", "-o", "page.html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    path = tmp_path / "page.html"
    text = path.read_text()
    policy = text.split('http-equiv="Content-Security-Policy" content="')[1].split('"')[0]
    assert "script-src 'sha256-" in policy and "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
    page = open_page(browser, path)
    try:
        seek(page, 400)
        assert shown(page)["plain"]["tokens"] > 0, "the replay did not run"
        assert offline_problems(page, path) == []
    finally:
        page.close()
    injected = tmp_path / "injected.html"  # a script the page did not ship is refused
    injected.write_text(text.replace("<body>", "<body><script>document.title='pwned'</script>", 1))
    page = open_page(browser, injected)
    try:
        assert page.evaluate("document.title") != "pwned"
        assert any("Content Security Policy" in p for p in offline_problems(page, injected))
    finally:
        page.close()


# --- bidi controls ----------------------------------------------------------------------------


def test_bidi_controls_reach_no_terminal_markdown_csv_or_html(tmp_path: Path) -> None:
    session = sf.session([("plain", BIDI, [huge_run(3, 10)]), ("spec", "Spec", [huge_run(3, 7)])])
    session.prompts[0].id = f"p{BIDI}"
    for run in session.runs:
        run.prompt = session.prompts[0].id
    archive.save(session, tmp_path / "s.json")
    outputs = []
    for fmt in ("md", "csv", "html"):
        result, _, _ = tokenreel("report", "s.json", "--format", fmt, "-o", f"out.{fmt}", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        outputs += [result.stderr, (tmp_path / f"out.{fmt}").read_text()]
    result, _, _ = tokenreel("report", "s.json", cwd=tmp_path)
    outputs += [result.stdout, result.stderr]
    result, _, _ = tokenreel("compare", "s.json", "s.json", cwd=tmp_path)
    outputs += [result.stdout, result.stderr]
    assert "click gnp.exe" in outputs[1]  # the label is there, without its controls
    for text in outputs:
        assert not BIDI_CHARS & set(text), [hex(ord(c)) for c in BIDI_CHARS & set(text)]


# --- spreadsheet formulas ----------------------------------------------------------------------

FORMULAS = ("=HYPERLINK(\"http://x.example\",\"go\")", "+cmd|' /C calc'!A0", "@SUM(A1)", "-2+3")


def test_no_csv_cell_is_a_formula_a_spreadsheet_would_run(tmp_path: Path) -> None:
    """Prompt ids, categories and labels that start a formula are written as text (a leading
    apostrophe) in the report's and compare's CSV; numbers stay numbers."""
    import csv
    import io

    session = sf.session([("plain", FORMULAS[3], [huge_run(3, 10)]), ("spec", "Spec", [huge_run(3, 7)])])
    session.prompts[0].id, session.prompts[0].category = FORMULAS[0], FORMULAS[1]
    session.arms[1].label = FORMULAS[2]
    for run in session.runs:
        run.prompt = session.prompts[0].id
    archive.save(session, tmp_path / "s.json")
    for command in (("report", "s.json"), ("compare", "s.json", "s.json")):
        result, _, _ = tokenreel(*command, "--format", "csv", "-o", "out.csv", "--force", cwd=tmp_path)
        assert result.returncode == 0, result.stderr  # compare: a session against itself is the same
        rows = list(csv.reader(io.StringIO((tmp_path / "out.csv").read_text())))
        cells = [cell for row in rows[1:] for cell in row]
        assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r") or (c.startswith("-") and not _number(c))], command
        assert f"'{FORMULAS[0]}" in cells, command
    assert any(_number(c) and float(c) > 0 for c in cells)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# --- a killed render worker -------------------------------------------------------------------


def _workers(parent: int) -> list[int]:
    """The pids of the render's pool workers (spawned children, not the resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"spawn_main" in cmdline:
            found.append(int(entry.name))
    return found


def test_a_killed_render_worker_is_one_line_and_leaves_no_output(tmp_path: Path) -> None:
    out = tmp_path / "video.mp4"
    render = subprocess.Popen(
        [*TOKENREEL, "render", REPO / "sessions" / "seed-ladder-demo.json", "--out", out, "--workers", "2"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 60
    while not (workers := _workers(render.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert workers, "no render worker started"
    time.sleep(1.0)  # mid-render, not during start-up
    os.kill(workers[0], signal.SIGKILL)
    _, stderr = render.communicate(timeout=120)
    assert render.returncode not in (0, None), stderr
    assert "Traceback" not in stderr and "BrokenProcessPool" not in stderr, stderr
    line = [s for s in stderr.splitlines() if s.startswith("tokenreel:")]
    assert len(line) == 1 and f"pid {workers[0]} killed by signal 9" in line[0] and "frames" in line[0], stderr
    assert not out.exists() and not list(tmp_path.glob("video.mp4*"))
