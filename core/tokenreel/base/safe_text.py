"""Text from outside (servers, session files, configs) made safe to print and to name files with.

Light on purpose (the standard library only): the CLI's consoles, the answers check and file
names all use it, and the renderer's workers import it without pulling in a terminal library.
"""

from __future__ import annotations

import html
import os
import re

# THE TERMINAL RULE: text from outside (server errors, session names, labels, prompt
# ids) may hold escape sequences that clear the screen, retitle the window or recolour what
# follows. Every CliConsole strips them from all it prints: whole sequences from each string it
# is given, and every control character left from each segment where rich turns segments into
# characters (tables, progress bars, Text); only rich's own styling and cursor controls get through.
# Bidi controls count as control characters: "click \u202egnp.exe" would show as
# "click exe.png". The markdown, CSV and HTML reports strip the same set from what they write.
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # marks, embeddings, overrides, isolates (a class body)
_ESCAPES = re.compile(
    r"\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"  # OSC (title, hyperlink...), to BEL or ST
    r"|\x1b[P^_X][^\x1b\x9c]*(?:\x1b\\|\x9c)"  # DCS, PM, APC, SOS strings
    r"|\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI (clear screen, colours, cursor moves)
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # 8-bit CSI
    r"|\x1b[ -/]*[0-~]?"  # any other escape
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"  # the remaining C0 and C1 controls (newline and tab stay)
    rf"|[{BIDI_CONTROLS}]"
)


def strip_controls(text: str) -> str:
    """`text` without terminal control sequences or control characters (newline and tab stay)."""
    return _ESCAPES.sub("", text) if _ESCAPES.search(text) else text


def esc(text: object) -> str:
    """Text escaped for HTML, without control or bidi characters (`strip_controls`): the HTML
    report and the render catalogue's index page both write text from session files."""
    return html.escape(strip_controls(str(text)), quote=True)


# A path is shown, not cleaned: stripping its control characters would name a file that does not
# exist. Controls (newline and tab too), bidi controls and the lone surrogates that stand for
# undecodable bytes of a file name are printed as their escapes instead.
_PATH_UNSAFE = re.compile(rf"[\x00-\x1f\x7f-\x9f{BIDI_CONTROLS}\ud800-\udfff]")


def shown_path(path: str | os.PathLike[str]) -> str:
    """`path` as a message prints it: every control, bidi or undecodable character as its escape
    (\\x1b, \\u202e, \\udcff), so what a terminal shows is the file's real name, legibly."""
    text = os.fspath(path)
    return _PATH_UNSAFE.sub(_escape, text) if _PATH_UNSAFE.search(text) else text


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def file_component(text: str) -> str:
    """`text` as one component of a file name: anything but letters, digits, '.', '_' and '-'
    becomes '_', and so does a leading '.', so an id from a session file can never choose a
    folder ('..', '/') or hide a file; at most 100 characters."""
    clean = re.sub(r"[^A-Za-z0-9._-]", "_", text)[:100]
    return re.sub(r"^\.", "_", clean) or "_"
