"""`tokenreel report --format html` in a real headless Chromium (tests/browser.py, DevTools protocol).

The page must load with no console error and no request but its own file, carry the charts, and
its replay must show, after a seek to N seconds, exactly the tokens and text of the events whose
archived arrival time is <= N s from request send. Expected values are computed here from the
session file, never read from the page's embedded data.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from tests import session_factory as sf
from tests.browser import Chromium, Page
from tests.test_recorder_support import arm_for, chat_prompt, fast_settings
from tokenreel.analysis.ladder import median_run
from tokenreel.analysis.selection import RunSelection
from tokenreel.base.safe_text import esc
from tokenreel.cli import app
from tokenreel.recorder.runner import new_session, record
from tokenreel.report import build_report, render_report, to_html
from tokenreel.report.wording import INTERVAL_MEANING, NO_HEADLINE, ratio_text
from tokenreel.session.archive import load
from tokenreel.session.model import Chunks, Clock, HostPressure, Run, Session
from tokenreel.simulator.server import SimCluster

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "sessions" / "seed-ladder-demo.json"
H200 = REPO / "tests" / "data" / "h200-llamacpp" / "session-default-cache.json"  # 12 prompts, 3 per category
NS_PER_MS = 1_000_000
CHARTS = ("chart-ladder", "chart-categories", "chart-race", "chart-itl")  # the four charts of issue 12


@pytest.fixture(scope="module")
def demo_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("html") / "demo.html"
    path.write_text(render_report(load(DEMO), "html"), encoding="utf-8")
    return path


def open_page(browser: Chromium, path: Path) -> Page:
    page = browser.new_page()
    page.navigate(path.as_uri())
    page.settle(0.2)  # anything the page does after its load event is recorded too
    return page


def offline_problems(page: Page, path: Path) -> list[str]:
    """Every console error/warning or exception, and every request but the page's own file."""
    return [*page.problems(), *(f"request: {url}" for url in page.requests() if url != path.as_uri())]


# --- what the page shows, read back from the DOM ----------------------------------------------


def seek(page: Page, ms: int) -> None:
    """Move the replay's slider as a user does (value, then an input event)."""
    page.evaluate(
        f"(() => {{ const s = document.getElementById('scrub'); s.value = '{ms}'; s.dispatchEvent(new Event('input')); }})()"
    )


def choose_prompt(page: Page, prompt_id: str) -> None:
    page.evaluate(
        "(() => { const p = document.getElementById('prompt');"
        f" p.selectedIndex = Array.from(p.options).findIndex(o => o.textContent.startsWith({orjson.dumps(prompt_id).decode()} + ' '));"
        " p.dispatchEvent(new Event('change')); })()"
    )


def shown(page: Page) -> dict[str, dict]:
    """Per arm panel: tokens shown (data-tokens), the run it plays, its text and its count line."""
    return {
        p["arm"]: p
        for p in page.evaluate(
            "Array.from(document.querySelectorAll('.arm-panel')).map(el => ({arm: el.dataset.arm,"
            " tokens: Number(el.dataset.tokens), run: el.dataset.run === undefined ? null : Number(el.dataset.run),"
            " text: el.querySelector('.stream').textContent, count: el.querySelector('.count').textContent}))"
        )
    }


def clock_ms(page: Page) -> tuple[int, str]:
    return page.evaluate("[Number(document.getElementById('clock').dataset.ms), document.getElementById('clock').textContent]")


def click(page: Page, selector: str) -> None:
    page.evaluate(f"document.querySelector({orjson.dumps(selector).decode()}).click()")


# --- what the archive says ----------------------------------------------------------------------


def arrived(chunks: Chunks, cutoff_ns: int) -> tuple[int, str]:
    """Tokens and text (per event: reasoning, content, tool call) of the events with t <= cutoff."""
    tokens, text = 0, []
    for i, t in enumerate(chunks.t_ns):
        if t <= cutoff_ns:
            tokens += chunks.tokens[i]
            text += [chunks.reasoning[i], chunks.content[i], chunks.tool[i]]
    return tokens, "".join(text)


def replayed_runs(session: Session, prompt_id: str) -> dict[str, Run]:
    """The run the replay should play per arm: the median run, as the video by default."""
    runs = {arm.id: median_run(session, arm.id, prompt_id) for arm in session.arms}
    return {arm: run for arm, run in runs.items() if run is not None}


def assert_shows_archive(page: Page, session: Session, prompt_id: str, ms: int) -> None:
    panels = shown(page)
    for arm, run in replayed_runs(session, prompt_id).items():
        tokens, text = arrived(run.chunks, ms * NS_PER_MS)
        panel = panels[arm]
        where = f"{prompt_id} at {ms} ms, arm {arm}"
        assert panel["run"] == run.index, f"{where}: plays run {panel['run']}, the median run is {run.index}"
        assert panel["tokens"] == tokens, f"{where}: shows {panel['tokens']} tokens, the archive has {tokens} by then"
        assert panel["count"].startswith(f"{tokens} / "), f"{where}: count line {panel['count']!r}"
        assert panel["text"] == text, f"{where}: text differs from the archive's ({len(panel['text'])} vs {len(text)} chars)"


# --- the tests ------------------------------------------------------------------------------------


def test_demo_page_loads_with_no_error_and_no_request(browser: Chromium, demo_html: Path) -> None:
    page = open_page(browser, demo_html)
    try:
        assert offline_problems(page, demo_html) == []
        assert page.requests() == [demo_html.as_uri()]  # the check did see the page's own load
        arms = page.evaluate("Array.from(document.querySelectorAll('.arm-panel')).map(el => el.dataset.arm)")
        assert arms == [arm.id for arm in load(DEMO).arms]
        sections = page.evaluate("Array.from(document.querySelectorAll('main > section')).map(s => s.id)")
        for section in ("ladder", "replay", "categories", "charts", "latency", "answers", "arms", "cells", "runs"):
            assert section in sections, f"no {section} section in the page (has {sections})"
    finally:
        page.close()


def test_network_check_catches_a_request(browser: Chromium, demo_html: Path, tmp_path: Path) -> None:
    """The offline check itself: a remote image injected into a copy of the page is caught, both
    as the request the page starts and, with the policy in place, as the policy's console error."""
    original = demo_html.read_text(encoding="utf-8")
    injected = original.replace("<body>", '<body><img src="http://127.0.0.1:9/pixel.png" alt="">', 1)
    assert injected != original
    no_policy = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", injected)
    assert no_policy != injected
    for name, text, policy_error in (("with-csp.html", injected, True), ("without-csp.html", no_policy, False)):
        copy = tmp_path / name
        copy.write_text(text, encoding="utf-8")
        page = open_page(browser, copy)
        try:
            problems = offline_problems(page, copy)
        finally:
            page.close()
        assert "request: http://127.0.0.1:9/pixel.png" in problems, f"{name}: {problems}"
        assert any("Content Security Policy" in p for p in problems) is policy_error, f"{name}: {problems}"


def test_charts_are_inline_svg(browser: Chromium, demo_html: Path) -> None:
    page = open_page(browser, demo_html)
    try:
        charts = page.evaluate(
            "Array.from(document.querySelectorAll('figure.chart')).map(f => ({id: f.id,"
            " svgs: f.querySelectorAll('svg').length,"
            " width: f.querySelector('svg') ? f.querySelector('svg').getBoundingClientRect().width : 0,"
            " shapes: f.querySelectorAll('path, rect, line, polyline').length}))"
        )
    finally:
        page.close()
    by_id = {c["id"]: c for c in charts}
    for chart in CHARTS:
        assert chart in by_id, f"no {chart} in the page (charts: {sorted(by_id)})"
        assert by_id[chart]["svgs"] == 1 and by_id[chart]["width"] > 300 and by_id[chart]["shapes"] > 10, by_id[chart]


@pytest.mark.parametrize("prompt_id", [p.id for p in load(DEMO).prompts])
def test_seek_shows_exactly_the_archived_tokens(browser: Chromium, demo_html: Path, prompt_id: str) -> None:
    """0, 50 ms, 1 s, 2.5 s and past the end, out of order (a seek back must take text away)."""
    session = load(DEMO)
    page = open_page(browser, demo_html)
    try:
        choose_prompt(page, prompt_id)
        end = max(run.chunks.t_ns[-1] for run in replayed_runs(session, prompt_id).values())
        for ms in (0, 2500, 50, 1000, 10**6):
            seek(page, ms)
            expected_ms = min(ms, -(-end // NS_PER_MS))  # the slider stops at the end of the replay
            assert clock_ms(page)[0] == expected_ms
            assert_shows_archive(page, session, prompt_id, expected_ms)
        final = shown(page)
        assert all(final[arm]["tokens"] == sum(run.chunks.tokens) for arm, run in replayed_runs(session, prompt_id).items())
        assert offline_problems(page, demo_html) == []
    finally:
        page.close()


def test_an_event_at_exactly_n_is_shown_at_n(browser: Chromium, tmp_path: Path) -> None:
    """Events at whole milliseconds (role chunk at 25 ms, tokens at 50, 70, 90 ms ...): one
    millisecond early shows nothing new, the event's own time shows it. Arm B answers otherwise
    from its second word: the answers section says so."""
    session = sf.session([("a", "Arm A", [sf.stream(sf.words(8), 50 * sf.MS, 20 * sf.MS)]),
                          ("b", "Arm B", [sf.stream(sf.words(1) + sf.words(7, start=3), 30 * sf.MS, 40 * sf.MS)])])
    path = tmp_path / "boundaries.html"
    path.write_text(render_report(session, "html"), encoding="utf-8")
    page = open_page(browser, path)
    try:
        for ms, a_tokens, b_tokens in ((0, 0, 0), (29, 0, 0), (30, 0, 1), (49, 0, 1), (50, 1, 1), (69, 1, 1), (70, 2, 2)):
            seek(page, ms)
            assert_shows_archive(page, session, "p1", ms)
            panels = shown(page)
            assert (panels["a"]["tokens"], panels["b"]["tokens"]) == (a_tokens, b_tokens), f"at {ms} ms"
        same = page.evaluate("Array.from(document.querySelectorAll('#answers tbody tr')).map(r => r.cells[2].textContent)")
        assert same == ["no"]
    finally:
        page.close()


def test_play_at_4x_then_pause_shows_the_tokens_of_the_clock(browser: Chromium, demo_html: Path) -> None:
    session = load(DEMO)
    prompt_id = session.prompts[0].id  # 8 s at 1x: still running after 1 s at 4x
    page = open_page(browser, demo_html)
    try:
        choose_prompt(page, prompt_id)
        click(page, 'button[data-speed="4"]')
        started = time.monotonic()
        click(page, "#play")
        page.settle(1.0)
        click(page, "#play")  # pause
        wall = time.monotonic() - started
        ms, text = clock_ms(page)
        assert text.startswith(f"{ms / 1000:.3f} s"), f"the clock shows {text!r} for {ms} ms"
        assert 4 * 500 <= ms <= 4 * wall * 1000 + 100, f"{ms} ms of replay after {wall:.2f} s at 4x"
        assert_shows_archive(page, session, prompt_id, ms)
        page.settle(0.3)
        assert clock_ms(page)[0] == ms, "the replay went on after pause"
        assert offline_problems(page, demo_html) == []
    finally:
        page.close()


HOSTILE = [
    "</script><script>document.title='pwned'</script>", " <img src=x onerror=\"document.title='img'\">", " <b>bold</b>", " &amp; done"
]


def test_answer_text_is_shown_as_text(browser: Chromium, tmp_path: Path) -> None:
    """Markup in an answer (or a prompt) is text on the page: no element, no script, no request.
    An arm with no usable run for the prompt says why instead of replaying."""
    session = sf.session(
        [
            ("a", "Arm <A>", [sf.stream(HOSTILE, 50 * sf.MS, 20 * sf.MS)]),
            ("b", "Arm B", [sf.stream(HOSTILE, 30 * sf.MS, 10 * sf.MS)]),
        ],
        prompt="Say </script> and <i>hello</i>",
    )
    session.runs[1].status, session.runs[1].error = "failed", "HTTP 500 from the endpoint"
    path = tmp_path / "hostile.html"
    path.write_text(render_report(session, "html"), encoding="utf-8")
    page = open_page(browser, path)
    try:
        seek(page, 10**6)
        assert offline_problems(page, path) == []
        assert page.evaluate("document.title").startswith("Synthetic ladder")
        panels = shown(page)
        assert panels["a"]["text"] == "".join(HOSTILE)
        assert page.evaluate("document.querySelectorAll('.stream img, .stream b, .stream script').length") == 0
        assert panels["b"]["tokens"] == 0 and panels["b"]["run"] is None
        assert "no run to replay" in panels["b"]["count"] and "failed" in panels["b"]["count"], panels["b"]["count"]
        assert "Say </script> and <i>hello</i>" in page.evaluate("document.getElementById('prompt-messages').textContent")
    finally:
        page.close()


def test_freshly_recorded_session_replays_exactly(browser: Chromium, sim: SimCluster, tmp_path: Path) -> None:
    """A session the recorder just wrote against the simulated ladder: same checks at a third,
    two thirds and past the end of the race."""
    arms = [arm_for(sim, profile.id) for profile in sim.profiles]
    session = new_session("fresh", fast_settings(max_tokens=48, repeats=3), [chat_prompt()], arms)
    asyncio.run(record(session, tmp_path / "fresh.json"))
    session = load(tmp_path / "fresh.json")
    path = tmp_path / "fresh.html"
    path.write_text(render_report(session, "html"), encoding="utf-8")
    page = open_page(browser, path)
    try:
        prompt_id = session.prompts[0].id
        end_ms = -(-max(r.chunks.t_ns[-1] for r in replayed_runs(session, prompt_id).values()) // NS_PER_MS)
        for ms in (end_ms // 3, 2 * end_ms // 3, end_ms):
            seek(page, ms)
            assert_shows_archive(page, session, prompt_id, ms)
        assert offline_problems(page, path) == []
        runs_table = page.evaluate("document.querySelector('#runs').textContent")
        measured = [r for r in session.runs if not r.warmup]
        assert all(r.clock is not None and r.clock.source == "kernel" for r in measured), [r.clock for r in measured]
        assert runs_table.count("kernel · client delay p99") == len(session.runs), runs_table
    finally:
        page.close()


def test_every_run_says_which_clock_stamped_it_and_whether_its_client_was_busy(tmp_path: Path) -> None:
    """Old runs say they predate kernel times; a busy kernel-clock run is kept (its times are the
    kernel's), a busy user-clock one is left out, and a first token read with later ones says so."""
    session = load(DEMO)
    kernel, user = [r for r in session.runs if not r.warmup][:2]
    kernel.clock = Clock(source="kernel", delay_p50_ms=0.4, delay_p99_ms=7.25, delay_max_ms=9.0, first_shared=True)
    user.clock = Clock(source="user", reason="no kernel receive times on this platform")
    kernel.client_busy = user.client_busy = True
    page = render_report(session, "html")
    runs_section = page[page.index('<section id="runs">'):]
    assert "kernel · client delay p99 7.25 ms · client busy (kernel times exact: kept)" in runs_section
    assert " · first token read with later ones: TTFT left out" in runs_section
    assert 'user (no kernel receive times on this platform) · <span class="flag">client busy: left out</span>' in runs_section
    assert runs_section.count("user (recorded before kernel times)") == len(session.runs) - 2


def test_report_writes_the_same_html_page_every_time(tmp_path: Path) -> None:
    """`report -o x.html` picks the format from the extension; the page is deterministic."""
    runner = CliRunner()
    for name in ("one.html", "two.html"):
        result = runner.invoke(app, ["report", str(DEMO), "-o", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
    first = (tmp_path / "one.html").read_bytes()
    assert first.startswith(b"<!DOCTYPE html>") and first == (tmp_path / "two.html").read_bytes()
    assert b"Content-Security-Policy" in first and b"default-src 'none'" in first


# --- the story on every screen (issue 24) ------------------------------------------------------

SCREENS = {"phone": (390, 844), "desktop": (1400, 900)}


def layout(page: Page) -> dict:
    """The page's overflow, the headline's box, and the ladder's last row's decode and vs. original cells."""
    return page.evaluate(
        "(() => { const box = el => { const r = el.getBoundingClientRect(); return {left: r.left, right: r.right, bottom: r.bottom}; };"
        " const last = Array.from(document.querySelectorAll('#ladder tbody tr')).pop();"
        " return {scrollWidth: document.documentElement.scrollWidth, width: window.innerWidth, height: window.innerHeight,"
        " claim: document.querySelector('.claim-text').textContent, claimBox: box(document.querySelector('.claim-text')),"
        " decode: box(last.cells[2]), vsFirst: box(last.cells[4])}; })()"
    )


@pytest.mark.parametrize("screen", SCREENS)
def test_the_page_opens_on_the_headline_and_fits_the_screen(browser: Chromium, demo_html: Path, screen: str) -> None:
    """No sideways scrolling of the page; the headline claim (the report's own words) on the
    first screen; on a phone the ladder's decode and vs. original cells of the last arm in view."""
    width, height = SCREENS[screen]
    page = browser.new_page()
    try:
        page.set_viewport(width, height)
        page.navigate(demo_html.as_uri())
        seen = layout(page)
    finally:
        page.close()
    headline = build_report(load(DEMO))["headline"]
    assert seen["scrollWidth"] <= seen["width"] == width, f"{screen}: the page is {seen['scrollWidth']} px wide in {width}"
    assert seen["claim"] == headline["text"], seen["claim"]
    assert seen["claimBox"]["bottom"] <= seen["height"], f"{screen}: the headline ends at {seen['claimBox']['bottom']} px"
    for cell in ("decode", "vsFirst"):
        assert 0 <= seen[cell]["left"] and seen[cell]["right"] <= width, f"{screen}: the last arm's {cell} cell at {seen[cell]}"


def test_a_one_arm_page_says_there_is_no_comparison() -> None:
    session = sf.session([("a", "Arm A", [sf.stream(sf.words(8), 50 * sf.MS, 20 * sf.MS)])])
    page = render_report(session, "html")
    assert f'<p class="claim none">{esc(NO_HEADLINE)}</p>' in page
    assert 'class="claim-text"' not in page


MARKDOWN = [
    "Intro with **bo", "ld** and `x = 1`.\n", "## Steps\n", "- first *step*\n", "```python\n",
    "print('<b>hi</b>')  # a comment long enough to wrap in a narrow panel, indented or not\n", "```\n",
    "| a | b |\n", "|---|---|\n", "| 1 | 2 |\n",
]


def rendered(page: Page) -> dict:
    """What the eye sees of arm a's answer (innerText) and which elements the markdown made."""
    return page.evaluate(
        "(() => { const s = document.querySelector('.arm-panel[data-arm=\"a\"] .stream');"
        " return {visible: s.innerText, strong: Array.from(s.querySelectorAll('strong')).map(e => e.innerText),"
        " em: s.querySelectorAll('em').length, code: Array.from(s.querySelectorAll('.md-code code')).map(e => e.innerText),"
        " inline: Array.from(s.querySelectorAll(':not(pre) > code')).map(e => e.innerText), headings: s.querySelectorAll('.md-h').length,"
        " items: s.querySelectorAll('ul > li').length, cells: s.querySelectorAll('table tr:not(.md) > *').length,"
        " syntax: Array.from(s.querySelectorAll('.md-code [class^=syn-]')).map(e => [e.className, e.innerText]),"
        " markup: s.querySelectorAll('b, img, script').length}; })()"
    )


def test_the_replay_renders_markdown_as_it_streams(browser: Chromium, tmp_path: Path) -> None:
    """Emphasis, code, a heading, a list, a fenced block and a pipe table become elements (no
    marker left on screen, answer markup still text); an unclosed ** shows as text; the text
    itself stays exactly the archive's."""
    session = sf.session([("a", "Arm A", [sf.stream(MARKDOWN, 50 * sf.MS, 20 * sf.MS)]),
                          ("b", "Arm B", [sf.stream(sf.words(8), 30 * sf.MS, 40 * sf.MS)])])
    path = tmp_path / "markdown.html"
    path.write_text(render_report(session, "html"), encoding="utf-8")
    page = open_page(browser, path)
    try:
        seek(page, 50)  # "Intro with **bo" only
        early = rendered(page)
        assert_shows_archive(page, session, "p1", 50)
        seek(page, 10**6)
        done = rendered(page)
        assert_shows_archive(page, session, "p1", 10**6)
        assert offline_problems(page, path) == []
    finally:
        page.close()
    assert early["strong"] == [] and "**bo" in early["visible"], early
    assert done["strong"] == ["bold"] and done["em"] == 1 and done["inline"] == ["x = 1"], done
    assert done["headings"] == 1 and done["items"] == 1 and done["cells"] == 4, done
    assert done["code"] == [MARKDOWN[5].rstrip("\n")], done["code"]
    assert ["syn-string", "'<b>hi</b>'"] in done["syntax"] and done["syntax"][-1][0] == "syn-comment", done["syntax"]
    assert done["markup"] == 0, "answer text became markup"
    for marker in ("**", "```", "`", "## ", "|", "- first"):
        assert marker not in done["visible"], f"{marker!r} left on screen: {done['visible']!r}"


def busy_host_session() -> Session:
    """Arm b's one run: on the kernel clock with a busy client (exact: it counts) and a contended host."""
    session = sf.session([("a", "Arm A", [sf.stream(sf.words(8), 50 * sf.MS, 20 * sf.MS)]),
                          ("b", "Arm B", [sf.stream(sf.words(8), 30 * sf.MS, 10 * sf.MS)])])
    run = session.runs[1]
    run.clock = Clock(source="kernel", delay_p50_ms=30.0, delay_p99_ms=80.0, delay_max_ms=90.0, first_shared=False)
    run.client_busy = True
    run.host = HostPressure(source="/proc/pressure/cpu", some_pct=40.0, before_pct=35.0, contended=True)
    return session


def runs_row(html_page: str, arm: str) -> str:
    runs = html_page[html_page.index('<section id="runs">'):]
    return next(row.split("</tr>")[0] for row in runs.split("<tr>") if row.startswith(f"<td>{arm}</td>"))


@pytest.mark.parametrize("exclude", [False, True])
def test_notes_tables_and_replay_follow_the_reports_selection(browser: Chromium, tmp_path: Path, exclude: bool) -> None:
    """A run the report counts (a busy client on the kernel clock) is replayed and never called
    left out; with --exclude-host-contended the same run is left out everywhere, saying why. The
    page takes its selection from the report it is given, not from a default."""
    session = busy_host_session()
    html_page = to_html(build_report(session, selection=RunSelection(exclude_host_contended=exclude)), session)
    path = tmp_path / "busy.html"
    path.write_text(html_page, encoding="utf-8")
    page = open_page(browser, path)
    try:
        seek(page, 10**6)
        b = shown(page)["b"]
    finally:
        page.close()
    row = runs_row(html_page, "b")
    if exclude:
        assert b["run"] is None and "host contended" in b["count"], b
        assert "no: host contended" in row, row
    else:
        assert b["run"] == 0 and b["tokens"] == 8, b
        assert "<td class=num>0 ▶</td>" in row and "<td>yes</td>" in row and "left out" not in row, row


# --- 95 % intervals (issue 26) -----------------------------------------------------------------

INTERVALS_SHOWN = (
    "(() => { const text = el => el ? el.textContent : null;"
    " const rows = sel => Array.from(document.querySelectorAll(sel + ' tbody tr')).map(r => Array.from(r.cells).map(text));"
    " const notes = sel => Array.from(document.querySelectorAll(sel + ' p.note')).map(text).join(' ');"
    " return {interval: text(document.querySelector('.claim-interval')), ladder: rows('#ladder'),"
    " ladderNotes: notes('#ladder'), categories: rows('#categories'), categoryNotes: notes('#categories')}; })()"
)


@pytest.mark.parametrize("path", [H200, DEMO], ids=["h200-12-prompts", "demo-4-prompts"])
def test_every_ratio_shows_its_interval_or_says_why_not(browser: Chromium, tmp_path: Path, path: Path) -> None:
    """The headline, the ladder's vs prior and vs original and the per-category vs original
    read in the browser as the markdown writes them ("1.22x [1.20–1.23]"), under the legend of
    what the brackets mean; where the report has no interval the page says why."""
    session = load(path)
    report = build_report(session)
    page_path = tmp_path / f"{path.stem}.html"
    page_path.write_text(to_html(report, session), encoding="utf-8")
    page = open_page(browser, page_path)
    try:
        seen = page.evaluate(INTERVALS_SHOWN)
        assert offline_problems(page, page_path) == []
    finally:
        page.close()
    for row, cells in zip(report["ladder"], seen["ladder"], strict=True):
        assert cells[3:5] == [ratio_text(row["vs_prior"], row["vs_prior_ci95"]), ratio_text(row["vs_first"], row["vs_first_ci95"])]
    for (category, rows), cells in zip(report["category_ladders"].items(), seen["categories"], strict=True):
        assert cells[0] == category.capitalize() and cells[-1] == ratio_text(rows[-1]["vs_first"], rows[-1]["vs_first_ci95"])
    assert INTERVAL_MEANING in seen["ladderNotes"]
    if path == H200:
        assert seen["interval"] == "95 % interval 1.97–2.31x" == report["headline"]["interval_text"]
        assert seen["ladder"][-1][3:5] == ["1.76x [1.62–1.91]", "2.14x [1.97–2.31]"]
        assert "No interval:" not in seen["ladderNotes"]
        assert "No interval per category for conversation: n = 3 prompts: no interval (it needs 6);" in seen["categoryNotes"]
    else:
        assert seen["interval"] == "n = 4 prompts: no interval (it needs 6)"
        assert "No interval: n = 4 prompts: no interval (it needs 6)." in seen["ladderNotes"]
        assert not any("[" in cell for row in seen["ladder"] + seen["categories"] for cell in row)
        assert "No interval per category for conversation: n = 1 prompt: no interval (it needs 6);" in seen["categoryNotes"]
