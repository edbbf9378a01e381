"""The shell every HTML view shares (the ladder page and the sweep page): the Content-Security-Policy,
the theme's colours and the stylesheet around the sections, and the small pieces both pages
build from (a table of escaped cells, an arm's coloured name, an inline SVG chart).

Why a policy that forbids every fetch: a report is mailed, attached to a ticket or opened from a
CI artefact, often offline, and a page that fetches anything breaks there and tells a third party
it was opened; a slip shows as a console error, never as a silent request. A page's own script
is allowed by its SHA-256 (no 'unsafe-inline' for scripts), so a script smuggled in by an
injection would not run. Styles stay 'unsafe-inline': the charts' SVG and the per-arm colours are
style attributes, which a hash cannot allow, and CSS cannot run code.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Sequence

from tokenreel import assets
from tokenreel.base.safe_text import esc
from tokenreel.base.theme import Theme, hex_color
from tokenreel.session.model import Session

THEME = "dark"
# No fetch of any kind: only the page's own inline styles, its one script (by hash), data: images.
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src {scripts}; img-src data:; base-uri 'none'; form-action 'none'"
_XML_PROLOGUE = re.compile(r"\A\s*(<\?xml[^>]*\?>\s*)?(<!DOCTYPE[^>]*>\s*)?", re.S)


def html_table(headers: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[int] = (), labelled: bool = False) -> str:
    """A table of already-escaped cells; columns in `numeric` are right-aligned figures. A
    `labelled` table's cells carry their column's (plain) header, for a narrow screen's cards."""

    def cell(i: int, text: str) -> str:
        label = f' data-label="{headers[i]}"' if labelled else ""
        return f'<td{" class=num" if i in numeric else ""}{label}>{text}</td>'

    head = "".join(f'<th{" class=num" if i in numeric else ""}>{h}</th>' for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell(i, c) for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def arm_colors(session: Session, theme: Theme) -> dict[str, str]:
    """Arm id -> its accent as CSS: the session's i-th arm has the theme's i-th accent, as in the
    video and the charts (`Style.arm`), on the ladder page and the sweep page alike."""
    return {arm.id: hex_color(theme.accent(i)) for i, arm in enumerate(session.arms)}


def arm_name(label: str, color: str) -> str:
    return f'<span class="arm-name"><span class="dot" style="--accent:{color}"></span>{esc(label)}</span>'


def inline_svg(svg: str) -> str:
    """An SVG document as an element of the page: its XML declaration and doctype dropped."""
    return _XML_PROLOGUE.sub("", svg, count=1)


def _theme_css(theme: Theme) -> str:
    fields = ("background", "panel", "panel_edge", "title", "text", "dim", "faint", "reasoning", "tool", "good")
    plain = "".join(f"--{f.replace('_', '-')}:{hex_color(getattr(theme, f))};" for f in fields)
    syntax = "".join(f"--syntax-{name}:{hex_color(rgb)};" for name, rgb in theme.syntax)  # the video's code colours
    return ":root{" + plain + syntax + "}"


def csp(*scripts: str) -> str:
    """The policy allowing exactly these inline scripts, each by the SHA-256 of its text ('none':
    a page without a script)."""
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'" for s in scripts)
    return CSP.format(scripts=hashes or "'none'")


def page(title: str, sections: list[str], theme: Theme, tail: str = "", script: str = "") -> str:
    """The shell of every HTML view: the policy, the theme's colours and the stylesheet, the
    sections, then `tail` (escaped data elements) and the page's one `script`, if any."""
    css = assets.file("html", "report.css").read_text(encoding="utf-8")
    scripts = (tail + "\n" if tail else "") + (f"<script>{script}</script>" if script else "")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp(script) if script else csp()}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title>"
        f"<style>{_theme_css(theme)}\n{css}</style></head>\n"
        f"<body><main>{''.join(sections)}</main>"
        '<footer>Made with tokenreel. One self-contained file: it loads nothing from the network.</footer>\n'
        f"{scripts}</body></html>\n"
    )
