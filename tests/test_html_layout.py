"""The HTML pages on a phone (390 px) and a desktop (1400 px) in a real headless Chromium.

What is checked, on the demo ladder's report and the demo sweep's page, every <details> opened:
nothing but a scroll box is wider than the screen (the page never scrolls sideways); every table
cell, headers included, can be brought into view inside its table's box, clear of the sticky first
column, and shows its whole content; the charts' text is at least 10 px tall as drawn. The sweep
page gives each arm the colour of its place in the session, as the ladder page and the video do,
and names arms by label.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser import Chromium
from tests.test_html_report import open_page
from tokenreel.base.theme import hex_color, load_theme
from tokenreel.report import render_report
from tokenreel.report.html_shell import THEME
from tokenreel.report.sweep_html import sweep_html
from tokenreel.session.archive import load
from tokenreel.session.grading import Grade, Grading
from tokenreel.session.model import Session

REPO = Path(__file__).resolve().parents[1]
# "graded": the demo ladder with every run graded by a rule of the test's, so the page has its accuracy section.
PAGES = {"ladder": REPO / "sessions" / "seed-ladder-demo.json", "sweep": REPO / "sessions" / "sweep-demo.json",
         "graded": REPO / "sessions" / "seed-ladder-demo.json"}
WIDTHS = (390, 1400)
MIN_CHART_PX = 10.0

# Elements outside any sideways-scrolling box that stick out of the screen.
OVERFLOW = """(() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const scrolls = el => { for (let a = el.parentElement; a; a = a.parentElement) {
    if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(a).overflowX)) return true; } return false; };
  const out = [];
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (!r.width || scrolls(el)) continue;
    if (r.left < -0.5 || r.right > innerWidth + 0.5) out.push(`${el.tagName}.${el.className} ${r.left}..${r.right}`);
  }
  return {scrollWidth: document.documentElement.scrollWidth, width: innerWidth, out};
})()"""

# Every cell of every table box, scrolled to: where it shows, whether it is the element seen at
# its centre, whether its content overflows it.
CELLS = """(() => {
  const bad = []; let cells = 0;
  document.querySelectorAll('.scroll').forEach((box, t) => {
    const name = (box.closest('section') || {}).id + '#' + t;
    if (box.scrollWidth > box.clientWidth + 1 && !['auto', 'scroll'].includes(getComputedStyle(box).overflowX))
      bad.push(`${name}: ${box.scrollWidth} px in a ${box.clientWidth} px box that does not scroll`);
    for (const row of box.querySelector('table').rows) {
      const first = row.cells[0];
      Array.from(row.cells).forEach((cell, j) => {
        if (!cell.getBoundingClientRect().width) return;  // not shown (a phone card's header row)
        cells++;
        const b = box.getBoundingClientRect(), c0 = cell.getBoundingClientRect();
        const sticky = j > 0 && getComputedStyle(first).position === 'sticky';
        const stickyWidth = sticky ? first.getBoundingClientRect().width : 0;
        box.scrollLeft = c0.left - b.left + box.scrollLeft - stickyWidth;
        window.scrollTo(0, c0.top + scrollY - innerHeight / 2);
        const box2 = box.getBoundingClientRect(), c = cell.getBoundingClientRect();
        const left = sticky ? first.getBoundingClientRect().right : box2.left;
        const where = `${name} row ${row.rowIndex} col ${j} ${JSON.stringify(cell.textContent.slice(0, 30))}`;
        if (c.left < left - 0.5 || c.right > Math.min(box2.right, innerWidth) + 0.5)
          bad.push(`${where}: shown at ${c.left}..${c.right}, box ${left}..${box2.right}`);
        const hit = document.elementFromPoint((c.left + c.right) / 2, (c.top + c.bottom) / 2);
        if (!hit || !cell.contains(hit)) bad.push(`${where}: covered by ${hit && hit.tagName}.${hit && hit.className}`);
        if (cell.scrollWidth > cell.clientWidth + 1) bad.push(`${where}: content ${cell.scrollWidth} px in ${cell.clientWidth}`);
      });
    }
    box.scrollLeft = 0;
  });
  return {cells, bad};
})()"""

# The drawn size of each chart text (matplotlib draws glyphs of size 100 scaled to the font size).
CHART_TEXT = """Array.from(document.querySelectorAll('figure.chart g[id*="-text_"] > g[transform*="scale("]'))
  .filter(g => g.getBoundingClientRect().width > 0)
  .map(g => { const m = g.getScreenCTM(); return 100 * Math.hypot(m.c, m.d); })"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The two demo pages as `report -o x.html` writes them."""
    out = tmp_path_factory.mktemp("pages")
    paths = {}
    for name, session in PAGES.items():
        paths[name] = out / f"{name}.html"
        chosen = graded(load(session)) if name == "graded" else load(session)
        page = sweep_html(chosen) if name == "sweep" else render_report(chosen, "html")
        paths[name].write_text(page, encoding="utf-8")
    return paths


def graded(session: Session) -> Session:
    """Every prompt graded; each arm fails one problem of its own (the first arm none), so each
    step has flips both ways and the section has every row kind."""
    for i, prompt in enumerate(session.prompts):
        prompt.grading = Grading(kind="answer", answer=str(i))
    failing = {arm.id: session.prompts[i - 1].id for i, arm in enumerate(session.arms) if i}
    for run in session.runs:
        run.grade = Grade(passed=failing.get(run.arm) != run.prompt)
    return session


def laid_out(browser: Chromium, path: Path, width: int, script: str) -> object:
    page = open_page(browser, path)
    try:
        page.set_viewport(width, 900)
        page.settle(0.1)
        return page.evaluate(script)
    finally:
        page.close()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PAGES)
def test_nothing_is_wider_than_the_screen(browser: Chromium, pages: dict[str, Path], name: str, width: int) -> None:
    seen = laid_out(browser, pages[name], width, OVERFLOW)
    assert isinstance(seen, dict)
    assert seen["width"] == width and seen["scrollWidth"] <= width, f"{name} at {width}: the page is {seen['scrollWidth']} px wide"
    assert seen["out"] == [], f"{name} at {width}: {seen['out'][:5]}"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PAGES)
def test_every_table_cell_can_be_seen_whole(browser: Chromium, pages: dict[str, Path], name: str, width: int) -> None:
    seen = laid_out(browser, pages[name], width, "document.querySelectorAll('details').forEach(d => { d.open = true; })," + CELLS)
    assert isinstance(seen, dict)
    assert seen["cells"] > (40 if name == "sweep" else 300), seen["cells"]  # the check saw the tables
    assert seen["bad"] == [], f"{name} at {width}: {len(seen['bad'])} problems: {seen['bad'][:6]}"


def test_the_graded_page_lays_out_its_accuracy_section(pages: dict[str, Path]) -> None:
    """The layout checks above ran over the accuracy table and its step lines."""
    page = pages["graded"].read_text(encoding="utf-8")
    assert page.count('<section id="accuracy">') == 1 and "newly solved" in page
    assert '<section id="accuracy">' not in pages["ladder"].read_text(encoding="utf-8")


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PAGES)
def test_chart_text_is_at_least_10_px(browser: Chromium, pages: dict[str, Path], name: str, width: int) -> None:
    sizes = laid_out(browser, pages[name], width, CHART_TEXT)
    assert isinstance(sizes, list) and len(sizes) > 30, sizes
    assert min(sizes) >= MIN_CHART_PX, f"{name} at {width}: chart text drawn at {min(sizes):.1f} px"


def test_the_categories_ratio_is_reachable_on_a_phone(browser: Chromium, pages: dict[str, Path]) -> None:
    """The per-category table's last column, the speed-up, keeps its header and shows in its box."""
    script = CELLS.replace("document.querySelectorAll('.scroll')", "document.querySelectorAll('#categories .scroll')")
    seen = laid_out(browser, pages["ladder"], 390, script)
    headers = laid_out(browser, pages["ladder"], 390, "Array.from(document.querySelectorAll('#categories th')).map(th => th.textContent)")
    assert isinstance(seen, dict) and isinstance(headers, list)
    assert headers[-1] == "vs. original" and seen["cells"] == 5 * len(headers) and seen["bad"] == []


def test_the_sweep_page_colours_and_names_arms_as_the_ladder_does(pages: dict[str, Path]) -> None:
    """Arm i wears the theme's i-th accent in the tables and the charts (the ladder page's and the
    video's rule), and every arm is named by its label."""
    session = load(PAGES["sweep"])
    page = pages["sweep"].read_text(encoding="utf-8")
    theme = load_theme(THEME)
    ladder = pages["ladder"].read_text(encoding="utf-8")
    for i, arm in enumerate(session.arms):
        accent = hex_color(theme.accent(i))
        assert f'<span class="dot" style="--accent:{accent}"></span>{arm.label}</span></h3>' in page, arm.id
        assert f"--accent:{accent}" in ladder  # the ladder page's i-th arm: the same colour
        group = re.search(rf'<g id="tokenreel-sweep-throughput-throughput-{arm.id}">(.*?)</g>', page, re.S)
        assert group is not None and f"stroke: {accent}" in group[1], arm.id
        assert arm.label != arm.id and f"<h3>{arm.id}" not in page
