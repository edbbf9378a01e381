"""How every chart looks and how it becomes bytes: theme colours, shipped fonts, fixed output.

Same session, same bytes: the SVG's hashed ids come from a fixed salt (and every id is prefixed
with the chart's name, so charts inlined in one HTML page never share one), dates and the tool's
version are left out of the metadata, text is drawn as paths (the SVG needs no font in the
browser), and every text uses a font file shipped in assets/tokenreel/assets/fonts, never a system font that
differs from machine to machine. The layout is computed once and frozen (`finish`).
Figures are `matplotlib.figure.Figure` objects on an explicit Agg canvas, never pyplot's global
figures, so nothing carries over from one chart to the next.
"""

from __future__ import annotations

import io
import re
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from xml.sax.saxutils import escape

import matplotlib
from matplotlib import font_manager
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.ft2font import FT2Font
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.text import Text
from matplotlib.typing import RcKeyType

from tokenreel import assets
from tokenreel.base.safe_text import strip_controls
from tokenreel.base.theme import Theme, hex_color

WIDTH_IN, HEIGHT_IN, DPI = 8.0, 4.5, 160  # PNG 1280 x 720; SVG 576 x 324 pt
REGULAR, BOLD = "JetBrainsMono-Regular.ttf", "JetBrainsMono-Bold.ttf"  # the video's faces
# After the face, glyph by glyph, for a text the face lacks a character of (a CJK arm label);
# no emoji font: matplotlib cannot draw colour bitmaps.
FALLBACK = (
    "DejaVuSansMono.ttf", "DroidSansFallbackFull.ttf", "NotoSansArabic-Regular.ttf", "NotoSansHebrew-Regular.ttf",
    "NotoSansDevanagari-Regular.ttf", "NotoSansThai-Regular.ttf", "NanumGothicCoding.ttf",
)
SIZE = {"title": 15.0, "label": 12.0, "small": 11.0, "value": 13.0}
PNG_METADATA = {"Software": None}
SVG_METADATA = {"Date": None, "Creator": None}
# Read by matplotlib at draw and save time, so applied around both (`drawing`); text.parse_math off:
# a label with two '$' is a label, not TeX.
RC: dict[RcKeyType, Any] = {"svg.fonttype": "path", "text.parse_math": False, "axes.unicode_minus": True, "path.simplify": True}


@dataclass(frozen=True)
class Style:
    """A theme's colours as matplotlib takes them (hex), converted once; arm i has the theme's
    i-th accent, as in the video."""

    theme: Theme
    background: str
    panel: str
    edge: str
    title: str
    text: str
    dim: str
    faint: str

    @classmethod
    def of(cls, theme: Theme) -> Style:
        fields = (theme.background, theme.panel, theme.panel_edge, theme.title, theme.text, theme.dim, theme.faint)
        return cls(theme, *(hex_color(rgb) for rgb in fields))

    def arm(self, index: int) -> str:
        """The accent of the session's index-th arm (`Theme.accent`, the renderer's rule)."""
        return hex_color(self.theme.accent(index))


@dataclass
class Chart:
    """One drawn chart: its figure and, for the SVG's <title>, every figure it shows as text."""

    name: str
    figure: Figure
    summary: list[str] = field(default_factory=list)
    fit: Callable[[], None] | None = None  # run by `finish` once the fonts are final (labels that must fit)


@lru_cache(maxsize=None)
def font_path(name: str) -> str:
    """A shipped font file, path as matplotlib's font manager knows it."""
    return str(assets.file("fonts", name))


@lru_cache(maxsize=None)
def _families() -> dict[str, str]:
    """Register the shipped fonts, first in the font manager's list so that a font of the same
    name installed on the system never wins the tie; file -> family name, each checked to
    resolve to the shipped file."""
    manager = font_manager.fontManager
    files = {name: font_path(name) for name in (REGULAR, BOLD, *FALLBACK)}
    known = {entry.fname for entry in manager.ttflist}
    for path in files.values():
        if path not in known:
            manager.addfont(path)
    ours = set(files.values())
    manager.ttflist.sort(key=lambda entry: entry.fname not in ours)  # stable: ours first
    manager._findfont_cached.cache_clear()  # type: ignore[attr-defined]  # private, not in the stubs: as addfont does
    families = {}
    for name, path in files.items():
        family = FT2Font(path).family_name
        weight = "bold" if name == BOLD else "normal"
        found = manager.findfont(FontProperties(family=family, weight=weight), fallback_to_default=False)
        if found != path:
            raise RuntimeError(f"font {family} resolves to {found}, not the shipped {path}")
        families[name] = family
    return families


@lru_cache(maxsize=None)
def _coverage(name: str) -> frozenset[int]:
    return frozenset(FT2Font(font_path(name)).get_charmap())


def font_for(text: str, size: float, bold: bool = False) -> FontProperties:
    """The video's face, by file, when it has every character of the text; else the shipped
    chain (the face, then FALLBACK), glyph by glyph, all in regular weight."""
    face = BOLD if bold else REGULAR
    if {ord(c) for c in text if not c.isspace()} <= _coverage(face):
        return FontProperties(fname=font_path(face), size=size)
    families = _families()
    return FontProperties(family=[families[name] for name in (REGULAR, *FALLBACK)], size=size)


@contextmanager
def drawing(salt: str = "") -> Iterator[None]:
    """The charts' settings, around drawing (a text keeps the parse_math it was made with) and
    saving (the SVG's hash salt: the chart's name)."""
    with matplotlib.rc_context({**RC, "svg.hashsalt": f"tokenreel-{salt}", "font.family": _families()[REGULAR]}):
        yield


def new_figure(style: Style) -> Figure:
    """A figure of the charts' one size on its own Agg canvas, laid out by constrained layout."""
    figure = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, facecolor=style.background, layout="constrained")
    FigureCanvasAgg(figure)
    layout = figure.get_layout_engine()
    assert isinstance(layout, ConstrainedLayoutEngine)  # layout="constrained" above
    layout.set(w_pad=0.12, h_pad=0.1)
    return figure


def style_axes(ax: Axes, style: Style) -> None:
    ax.set_facecolor(style.panel)
    for spine in ax.spines.values():
        spine.set_color(style.edge)
    ax.tick_params(colors=style.dim, labelcolor=style.text, labelsize=SIZE["label"])
    ax.grid(True, color=style.edge, linewidth=0.8)
    ax.set_axisbelow(True)


def set_title(chart: Chart, text: str, style: Style) -> None:
    """The chart's title, at the figure's left edge (not the axes': long arm labels move those)."""
    chart.figure.suptitle(strip_controls(text), x=0.015, ha="left", color=style.title, fontsize=SIZE["title"], fontweight="bold")


def no_data(chart: Chart, ax: Axes, reason: str, style: Style) -> Chart:
    """A chart with nothing to draw: empty axes that say why ("no data: <reason>")."""
    ax.set_xticks([])
    ax.set_yticks([])
    ax.text(0.5, 0.5, f"no data: {reason}", ha="center", va="center", color=style.dim, fontsize=SIZE["label"],
            transform=ax.transAxes)
    chart.summary.append(f"no data: {reason}")
    return chart


def wrap_note(lines: list[str], width: int) -> str:
    """A chart's note: its lines, each wrapped to `width` characters (its axes' width in small type)."""
    return "\n".join(textwrap.fill(line, width) for line in lines)


def legend_columns(labels: list[str]) -> int:
    """How many legend entries fit side by side across the figure (monospace: 0.6 em a character,
    plus the swatch): the most n such that the n widest fit."""
    widths = sorted(((len(label) + 6) * 0.6 * SIZE["small"] for label in labels), reverse=True)
    n = 1
    while n < len(widths) and sum(widths[: n + 1]) <= WIDTH_IN * 72 * 0.96:
        n += 1
    return n


def _fix_fonts(figure: Figure) -> None:
    """Every text in a shipped font; twice, as drawing makes the tick labels not made yet."""
    fixed: set[int] = set()
    for _ in range(2):
        for text in figure.findobj(Text):
            if id(text) in fixed:  # its weight is in its font file now
                continue
            fixed.add(id(text))
            bold = text.get_fontweight() in ("bold", 700, "heavy", "extra bold", "black")
            text.set_fontproperties(font_for(text.get_text(), float(text.get_fontsize()), bold))  # in points: a number
        figure.draw_without_rendering()


def finish(chart: Chart) -> None:
    """Fix fonts, then the layout: call once after drawing, before `svg_text`/`png_bytes`.
    Constrained layout moves the axes a little at every draw, so it runs here with the final
    fonts and is then switched off: the SVG is the same whether a PNG was saved first or not."""
    with drawing(chart.name):
        _fix_fonts(chart.figure)
        if chart.fit is not None:
            chart.fit()
        chart.figure.draw_without_rendering()
        chart.figure.set_layout_engine("none")


_SVG_OPEN = re.compile(r"<svg [^>]*>")
_ID = re.compile(r'\bid="([^"]+)"')


def scoped_ids(svg: str, scope: str) -> str:
    """Every id (and each reference to it) prefixed with the chart's scope: matplotlib numbers
    its groups and names its glyphs the same in every SVG, and charts inlined in one HTML page
    must not share an id."""
    ids = sorted(set(_ID.findall(svg)), key=len, reverse=True)
    if not ids:
        return svg
    pattern = re.compile(r'(id="|href="#|url\(#)(' + "|".join(map(re.escape, ids)) + r')(?=[")])')
    return pattern.sub(lambda m: f"{m.group(1)}{scope}-{m.group(2)}", svg)


def svg_text(chart: Chart) -> str:
    """The chart as SVG text, the same for the same chart; its <title> lists what it shows."""
    buffer = io.BytesIO()
    with drawing(chart.name):
        chart.figure.savefig(buffer, format="svg", dpi=DPI, metadata=SVG_METADATA)
    svg = scoped_ids(buffer.getvalue().decode("utf-8"), f"tokenreel-{chart.name}")
    title = escape(strip_controls("; ".join(chart.summary)))
    match = _SVG_OPEN.search(svg)
    assert match is not None  # matplotlib always writes one
    return f"{svg[: match.end()]}\n <title>{title}</title>{svg[match.end():]}"


def png_bytes(chart: Chart) -> bytes:
    buffer = io.BytesIO()
    with drawing(chart.name):
        chart.figure.savefig(buffer, format="png", dpi=DPI, metadata=PNG_METADATA)
    return buffer.getvalue()
