"""`tokenreel plot` and tokenreel.report.charts: every chart written, valid, deterministic to the byte
(twice in one process and in a fresh one), its numbers the report's, the race curve ending at
each arm's token count at its last token, and a missing figure drawn as "no data: <why>".

Real files throughout: the archived demo session, a session recorded here from the simulated
endpoints, and small sessions built in code for the edge cases (one arm, a failed arm).
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import numpy
import pytest
from matplotlib import font_manager
from matplotlib.container import ErrorbarContainer
from matplotlib.text import Text
from PIL import Image

from tests import session_factory as sf
from tests.test_cli import invoke, write_config
from tokenreel import assets
from tokenreel.analysis.figures import figure, multiplier
from tokenreel.analysis.ladder import build_cells, common_prompts, median_run
from tokenreel.analysis.metrics import NS_PER_S, output_tokens, run_metrics
from tokenreel.base.theme import load_theme
from tokenreel.report import build_report, to_markdown
from tokenreel.report.charts import chart_svgs, write_charts
from tokenreel.report.charts.bars import categories_chart, ladder_chart
from tokenreel.report.charts.itl import arm_samples, itl_chart
from tokenreel.report.charts.race import race_chart
from tokenreel.report.charts.style import Style, drawing, finish
from tokenreel.session import archive
from tokenreel.session.model import Chunks, Session

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "sessions" / "seed-ladder-demo.json"
H200 = REPO / "tests" / "data" / "h200-llamacpp" / "session-default-cache.json"  # 12 prompts, 3 per category
PNG_SIZE = (1280, 720)
SVG_SIZE = ("576pt", "324pt")
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def demo() -> Session:
    return archive.load(DEMO)


@pytest.fixture(scope="module")
def demo_charts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`tokenreel plot` on the demo session, as a user runs it."""
    out = tmp_path_factory.mktemp("charts")
    result = invoke("plot", DEMO, "--out", out)
    assert result.exit_code == 0, result.output
    return out


def expected_names(session: Session) -> set[str]:
    stems = ["ladder", "categories", "itl", *(f"race-{p.id}" for p in session.prompts)]
    if any(e["rates"] for e in build_report(session)["acceptance_positions"]):
        stems.append("positions")  # a drafter arm with per-position counts
    if any(not d["missing"] and d["scope"] == "category" for d in build_report(session)["decomposition"]["arms"]):
        stems.append("decomposition")  # a drafter arm with acceptance counted, against its target
    return {f"{stem}.{fmt}" for stem in stems for fmt in ("png", "svg")}


def all_texts(chart) -> list[str]:  # noqa: ANN001 (a Chart)
    return [t.get_text() for t in chart.figure.findobj(Text) if t.get_text()]


def drawn(build, *args) -> object:  # noqa: ANN001 (a chart function and its arguments)
    """A chart drawn and finished as `write_charts` does, for reading its artists."""
    with drawing():
        chart = build(*args, Style.of(load_theme("dark")))
    finish(chart)
    return chart


def test_plot_writes_every_chart_as_valid_png_and_svg(demo: Session, demo_charts: Path) -> None:
    assert {p.name for p in demo_charts.iterdir()} == expected_names(demo)  # a missing chart fails here
    for path in sorted(demo_charts.iterdir()):
        if path.suffix == ".png":
            with Image.open(path) as image:
                image.verify()
            with Image.open(path) as image:
                assert (image.format, image.size) == ("PNG", PNG_SIZE), path
                colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
                assert colours is not None and len(colours) > 50, f"{path} looks blank"
        else:
            root = ET.parse(path).getroot()
            assert root.tag == f"{SVG}svg" and (root.get("width"), root.get("height")) == SVG_SIZE, path
            assert len(root.findall(f".//{SVG}path")) > 20, f"{path} draws nothing"
            title = root.find(f"{SVG}title")
            assert title is not None and title.text, f"{path} has no <title>"


def test_plot_prints_the_paths_it_wrote(tmp_path: Path) -> None:
    result = invoke("plot", DEMO, "--out", tmp_path, "--format", "svg", "--prompt", "code-1", "--theme", "light")
    assert result.exit_code == 0, result.output
    printed = result.stdout.split()
    assert sorted(printed) == sorted(str(p) for p in tmp_path.iterdir())
    assert {Path(p).name for p in printed} == {"ladder.svg", "categories.svg", "race-code-1.svg", "itl.svg", "decomposition.svg"}


def test_same_bytes_twice_and_in_a_fresh_process(demo: Session, tmp_path: Path) -> None:
    first = write_charts(demo, tmp_path / "a", ["png", "svg"])
    second = write_charts(demo, tmp_path / "b", ["png", "svg"])
    fresh = tmp_path / "c"
    script = (
        "import sys; from pathlib import Path; from tokenreel.session import archive; from tokenreel.report.charts import write_charts;"
        "write_charts(archive.load(sys.argv[1]), Path(sys.argv[2]), ['png', 'svg'])"
    )
    subprocess.run([sys.executable, "-c", script, str(DEMO), str(fresh)], check=True, cwd=tmp_path)
    assert [p.name for p in first] == [p.name for p in second] and len(first) == len(expected_names(demo))
    for path in first:
        data = path.read_bytes()
        assert data == (tmp_path / "b" / path.name).read_bytes(), f"{path.name} differs between two runs"
        assert data == (fresh / path.name).read_bytes(), f"{path.name} differs in a fresh process"
    svg = (tmp_path / "a" / "ladder.svg").read_text()
    assert "<dc:date>" not in svg and "Matplotlib" not in svg  # no date, no tool version


def test_chart_svgs_are_the_plotted_files_with_ids_unique_across_charts(demo: Session, demo_charts: Path) -> None:
    svgs = chart_svgs(demo, build_report(demo), "code-1")
    assert set(svgs) == {"ladder", "categories", "race", "itl", "decomposition"}  # the demo's drafter has its decomposition
    assert svgs["decomposition"] == (demo_charts / "decomposition.svg").read_text()
    assert svgs["race"] == (demo_charts / "race-code-1.svg").read_text()
    assert svgs["ladder"] == (demo_charts / "ladder.svg").read_text()
    ids = [el.get("id") for text in svgs.values() for el in ET.fromstring(text).iter() if el.get("id")]
    assert len(ids) == len(set(ids)) > 100  # inlined in one page, no two charts share an id


def _markdown_ladder(report: dict, session: Session) -> list[list[str]]:
    """The report's markdown ladder rows, split into cells: what a reader of the report sees."""
    lines = to_markdown(report, session).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Step |")) + 2
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines[start: start + len(report["ladder"])]]


def test_ladder_labels_are_the_reports_figures(demo: Session, demo_charts: Path) -> None:
    report = build_report(demo)
    chart = drawn(ladder_chart, report)
    texts = all_texts(chart)
    title = ET.parse(demo_charts / "ladder.svg").getroot().find(f"{SVG}title").text
    for row, cells in zip(report["ladder"], _markdown_ladder(report, demo), strict=True):
        speed, vs_prior, vs_first = cells[2], cells[3], cells[4]  # "97.1 tok/s", "1.00x", "1.00x"
        assert speed == figure(row["decode_tok_s"], 1, " tok/s")
        assert speed in texts, f"{row['arm']}: {speed} not drawn ({texts})"
        wanted = [f"{vs_prior} vs prior", f"{vs_first} vs {report['baseline']}"]
        assert all(line in texts for line in wanted), f"{row['arm']}: {wanted!r} not drawn"
        assert f"{row['label']}: {speed}, {' · '.join(wanted)}" in title
    box = chart.figure.axes[0].get_window_extent()
    for text in chart.figure.axes[0].texts:  # every label right of its bar ends inside the axes
        assert box.x0 <= text.get_window_extent().x0 and text.get_window_extent().x1 <= box.x1, text.get_text()


def test_category_speedups_are_the_reports(demo: Session, demo_charts: Path) -> None:
    report = build_report(demo)
    texts = all_texts(drawn(categories_chart, report))
    base, last = report["baseline"], report["ladder"][-1]["arm"]
    markdown = to_markdown(report, demo)
    assert len(report["categories"]) == 4
    for category, row in report["categories"].items():
        speedup = multiplier(row[last] / row[base])
        assert f"| {category.capitalize()} |" in markdown and f"| {speedup} |" in markdown
        assert speedup in texts
    title = ET.parse(demo_charts / "categories.svg").getroot().find(f"{SVG}title").text
    assert (
        f"code {report['ladder'][-1]['label']}: "
        f"{multiplier(report['categories']['code'][last] / report['categories']['code'][base])}"
    ) in title


def test_race_curve_reaches_each_arms_tokens_at_its_last_token(demo: Session) -> None:
    for prompt in demo.prompts:
        chart = drawn(race_chart, demo, build_report(demo), prompt.id)
        ax = chart.figure.axes[0]
        lines = {line.get_gid(): line for line in ax.get_lines() if line.get_gid()}
        assert len(lines) == len(demo.arms)
        for arm in demo.arms:
            run = median_run(demo, arm.id, prompt.id)
            figures = run_metrics(run)
            x, y = (list(v) for v in lines[f"race-{arm.id}"].get_data())
            t_last = max(t for t, n in zip(run.chunks.t_ns, run.chunks.tokens, strict=False) if n > 0)
            assert (x[-1], y[-1]) == (t_last / NS_PER_S, output_tokens(run))
            assert (x[0], y[0]) == (0.0, 0)
            leaves_zero = next(i for i, n in enumerate(y) if n > 0)
            assert x[leaves_zero] == figures.ttft_s  # TTFT: where the curve leaves zero
            assert all(b >= a for a, b in zip(y, y[1:], strict=False)) and all(b >= a for a, b in zip(x, x[1:], strict=False))
            ttft_ns = round(figures.ttft_s * NS_PER_S)
            wanted = f"TTFT {ttft_ns // NS_PER_S}.{ttft_ns % NS_PER_S // 10**7:02d} s"  # the video's clock reading
            assert wanted in " ".join(all_texts(chart))


def _chunks(count: int, k: int, gap_ms: int) -> Chunks:
    """A first token at 100 ms, then `count` chunks of k tokens, gap_ms apart."""
    chunks = Chunks()
    chunks.append(50 * sf.MS, 0)
    chunks.append(100 * sf.MS, 1, content="a")
    for i in range(count):
        chunks.append((100 + (i + 1) * gap_ms) * sf.MS, k, content="b" * k)
    return chunks


def test_itl_is_per_token_and_its_percentiles_are_the_reports() -> None:
    session = sf.session([("plain", "Plain", [_chunks(40, 1, 10)]), ("spec", "Speculative", [_chunks(10, 4, 20)])])
    prompts = common_prompts(session, build_cells(session))
    plain, spec = arm_samples(session, "plain", prompts), arm_samples(session, "spec", prompts)
    assert (list(plain.values), list(plain.at_or_below)) == ([10.0], [40])
    assert (list(spec.values), list(spec.at_or_below)) == ([0.0, 20.0], [30, 40])  # a chunk of 4: one 20 ms gap, then 3 zeros
    report = build_report(session)
    chart = drawn(itl_chart, session, report)
    lines = {line.get_gid(): line for line in chart.figure.axes[0].get_lines() if line.get_gid()}
    x, y = (list(v) for v in lines["itl-spec"].get_data())
    assert x[1] == 0.0 and y[1] == pytest.approx(0.75) and (x[-1], y[-1]) == (20.0, 1.0)
    texts = " ".join(all_texts(chart))
    markdown = to_markdown(report, session)
    for arm, samples in (("plain", plain), ("spec", spec)):
        expanded = numpy.repeat(samples.values, numpy.diff(samples.at_or_below, prepend=0))
        row = next(r for r in report["latency"]["arms"] if r["arm"] == arm)["itl_ms"]
        assert (row["n"], row["p90"]) == (len(expanded), float(numpy.percentile(expanded, 90)))
        p50, p90, p99, longest = (figure(row[p], 2) for p in ("p50", "p90", "p99", "max"))
        assert f"{p50} / {p90} / {p99}" in markdown  # as the report prints them
        assert f"p50 {p50} · p90 {p90} · p99 {p99} · max {longest} ms" in texts


def test_one_arm_and_a_failed_arm_draw_labelled_gaps(tmp_path: Path) -> None:
    one = sf.session([("solo", "Solo", [_chunks(30, 1, 10)])])
    paths = write_charts(one, tmp_path / "one", ["png", "svg"])
    assert {p.name for p in paths} == expected_names(one)
    assert "no data: only one arm, nothing to compare" in (tmp_path / "one" / "categories.svg").read_text()

    session = sf.session([("ok", "Works", [_chunks(30, 1, 10)]), ("broken", "Broken", [_chunks(30, 1, 10)])])
    session.runs = [r if r.arm == "ok" else replace(r, status="failed", error="HTTP 500 from the server") for r in session.runs]
    report = build_report(session)
    ladder = " ".join(all_texts(drawn(ladder_chart, report)))
    assert "no data: no usable run (all 1 run failed: HTTP 500 from the server)" in ladder
    race = " ".join(all_texts(drawn(race_chart, session, report, "p1")))
    assert "Broken · no data: all 1 run failed: HTTP 500 from the server" in race
    itl = " ".join(all_texts(drawn(itl_chart, session, report)))
    assert itl.count("no data: no prompt that every arm has a usable run of") == 2
    written = write_charts(session, tmp_path / "failed", ["svg"])
    assert "Broken: no data" in (tmp_path / "failed" / "ladder.svg").read_text()
    assert len(written) == 4


def test_every_text_is_drawn_in_a_shipped_font(demo: Session) -> None:
    fonts = assets.folder("fonts")
    labelled = replace(demo, arms=[replace(demo.arms[0], label="原版 · bf16"), *demo.arms[1:]])
    chart = drawn(ladder_chart, build_report(labelled))
    files = {Path(f) for t in chart.figure.findobj(Text) for f in font_manager.fontManager._find_fonts_by_props(t.get_fontproperties())}
    assert files and all(f.parent == fonts for f in files), files
    assert fonts / "DroidSansFallbackFull.ttf" in files  # the CJK label has a font for its characters


def test_prompt_ids_become_safe_distinct_file_names(tmp_path: Path) -> None:
    session = sf.session([("a", "A", [_chunks(5, 1, 10)])])
    twin = replace(session.prompts[0], id="x/y")
    session.prompts = [twin, replace(twin, id="x_y"), replace(twin, id="../z")]
    session.runs = [replace(r, prompt=p.id) for r in session.runs for p in session.prompts]
    names = [p.name for p in write_charts(session, tmp_path, ["svg"])]
    assert names == ["ladder.svg", "categories.svg", "race-x_y.svg", "race-x_y-2.svg", "race-_._z.svg", "itl.svg"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = invoke("plot", tmp_path / "nope.json", "--out", tmp_path / "c")
    assert missing.exit_code == 2 and "nope.json" in missing.output and len(missing.output.splitlines()) == 1
    unknown = invoke("plot", DEMO, "--out", tmp_path / "c", "--prompt", "no-such")
    assert unknown.exit_code == 2 and "no prompt 'no-such'" in unknown.output and "code-1" in unknown.output
    assert not (tmp_path / "c").exists()
    assert invoke("plot", DEMO, "--out", tmp_path / "c", "--format", "svg").exit_code == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "c").iterdir()}
    (tmp_path / "c" / "ladder.svg").write_text("mine")
    again = invoke("plot", DEMO, "--out", tmp_path / "c", "--format", "svg", "--theme", "light")
    assert again.exit_code == 2 and "ladder.svg already exists; pass --force" in again.output
    assert (tmp_path / "c" / "ladder.svg").read_text() == "mine"  # nothing overwritten
    assert all((tmp_path / "c" / n).read_bytes() == b for n, b in before.items() if n != "ladder.svg")
    forced = invoke("plot", DEMO, "--out", tmp_path / "c", "--format", "svg", "--force")
    assert forced.exit_code == 0 and (tmp_path / "c" / "ladder.svg").read_bytes() == before["ladder.svg"]
    bad = invoke("plot", DEMO, "--out", tmp_path / "d", "--format", "jpg")
    assert bad.exit_code == 2 and "jpg is not a chart format" in bad.output


def test_plot_a_freshly_recorded_session(tmp_path: Path, sim) -> None:  # noqa: ANN001 (the simulator fixture)
    config = write_config(tmp_path / "c.toml", sim, max_tokens=48, repeats=1)
    session_path = tmp_path / "s.json"
    assert invoke("record", "--config", config, "--out", session_path).exit_code == 0
    result = invoke("plot", session_path, "--out", tmp_path / "charts")
    assert result.exit_code == 0, result.output
    session = archive.load(session_path)
    assert {p.name for p in (tmp_path / "charts").iterdir()} == expected_names(session)
    title = ET.parse(tmp_path / "charts" / "ladder.svg").getroot().find(f"{SVG}title").text
    for row in build_report(session)["ladder"]:
        assert f"{row['label']}: {figure(row['decode_tok_s'], 1, ' tok/s')}" in title


def whiskers(chart) -> list[float]:  # noqa: ANN001 (a Chart)
    """Low, high of every error bar drawn in turn, in data units along the bar."""
    out = []
    for container in chart.figure.axes[0].containers:
        if isinstance(container, ErrorbarContainer):
            (segment,) = container.lines[2][0].get_segments()
            horizontal = segment[0][1] == segment[1][1]
            out += sorted(point[0 if horizontal else 1] for point in segment)
    return out


def test_ladder_whiskers_are_the_reports_intervals_or_the_note_says_why() -> None:
    """H200 (12 prompts): each arm's vs-first interval is a whisker (the first arm's tok/s times
    its bounds, so it brackets the bar's end) and both ratios carry it in brackets; the demo (4
    prompts) draws none and its note gives the report's reason."""
    report = build_report(archive.load(H200))
    chart = drawn(ladder_chart, report)
    base = report["ladder"][0]["decode_tok_s"]
    rows = report["ladder"][1:]
    assert whiskers(chart) == pytest.approx([base * bound for r in rows for bound in r["vs_first_ci95"]], rel=1e-12)
    texts = all_texts(chart)
    assert "1.76x [1.62–1.91] vs prior" in texts and "2.14x [1.97–2.31] vs f16" in texts
    assert any(t.startswith("[low–high]: 95 % interval over prompts; whisker: the vs-f16 interval") for t in texts), texts
    assert not any("No interval" in t for t in texts)

    demo = drawn(ladder_chart, build_report(archive.load(DEMO)))
    assert whiskers(demo) == [] and "No interval: n = 4 prompts: no interval (it needs 6)" in all_texts(demo)


def test_category_whiskers_where_a_category_has_its_interval() -> None:
    """Six prompts a category: every bar has its whisker, the category ladder's interval; with
    three (H200) none has, and the note names the categories and the reason."""
    session = sf.suite([("a", "Arm A", 20), ("b", "Arm B", 10), ("c", "Arm C", 5)], categories=("prose", "code"), per_category=6)
    report = build_report(session)
    chart = drawn(categories_chart, report)
    expected = [bound for i in (1, 2) for c in ("prose", "code") for bound in report["category_ladders"][c][i]["vs_first_ci95"]]
    assert whiskers(chart) == pytest.approx(expected, rel=1e-12)
    assert "whisker: 95 % interval of the speed-up over the category's prompts" in all_texts(chart)

    h200 = drawn(categories_chart, build_report(archive.load(H200)))
    assert whiskers(h200) == []
    note = "No interval for conversation, reasoning, prose, code: n = 3 prompts: no interval (it needs 6)"
    assert note in " ".join(" ".join(all_texts(h200)).split())  # the note wraps
