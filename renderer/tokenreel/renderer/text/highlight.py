"""Syntax colours for the streamed answer: fenced ``` blocks, or all of it for code prompts;
the answer itself is shown as markdown renders it (markdown.py).

The whole final text is lexed once and frames show a prefix of it, so a string literal is
already coloured while it streams in; nothing re-lexes per frame. Lexers come by exact name
only: Pygments' guessing also consults installed plugins, which would let the environment
change the pixels, so blocks without a language use DEFAULT_LANGUAGE.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Sequence
from functools import lru_cache

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.lexers.special import TextLexer
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, _TokenType
from pygments.util import ClassNotFound

from tokenreel.renderer.text import markup as markdown
from tokenreel.renderer.text.style_ids import StyleIds

DEFAULT_LANGUAGE = "python"  # the most common language in model answers
TEXT = "text"  # style of prose outside code
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)[^\n`]*\n?")
_LINE = re.compile(r"[^\n]*\n?")
# Styles _style gives lexed code; wrap.py wraps a line that starts in one of these as code.
CODE_STYLES = frozenset({"comment", "string", "number", "keyword", "builtin", "name", "operator", "punctuation", "code"})


@lru_cache(maxsize=None)
def _style(token: _TokenType) -> str:
    for parent, style in (
        (Comment, "comment"),
        (String, "string"),
        (Number, "number"),
        (Keyword, "keyword"),
        (Operator.Word, "keyword"),
        (Name.Builtin, "builtin"),
        (Name.Function, "name"),
        (Name.Class, "name"),
        (Name.Decorator, "name"),
        (Name.Tag, "name"),
        (Operator, "operator"),
        (Punctuation, "punctuation"),
    ):
        if token in parent:
            return style
    return "code"


@lru_cache(maxsize=64)
def _lexer(language: str) -> Lexer:
    try:
        return get_lexer_by_name(language or DEFAULT_LANGUAGE)
    except ClassNotFound:
        return TextLexer()


def _paint_code(paint: Callable[[int, int, str], None], text: str, start: int, end: int, language: str) -> None:
    # get_tokens_unprocessed works on the raw text (get_tokens would rewrite newlines and shift offsets).
    for offset, token, value in _lexer(language.lower()).get_tokens_unprocessed(text[start:end]):
        a = start + offset
        b = min(a + len(value), end)
        if b > a:
            paint(a, b, _style(token))


def content_styles(text: str, code: bool) -> list[str]:
    """One style name per character of text; code=True lexes unfenced text as code."""
    styles = [TEXT] * len(text)

    def paint(a: int, b: int, style: str) -> None:
        styles[a:b] = [style] * (b - a)

    fenced = False
    open_fence: tuple[str, str, int] | None = None  # (marker, language, body start)
    for line in _LINE.finditer(text):
        if not line.group():
            break
        pos, end = line.start(), line.end()
        match = _FENCE.fullmatch(line.group())
        if open_fence is None and match:
            open_fence = (match.group(1), match.group(2), end)
            styles[pos:end] = ["fence"] * (end - pos)
            fenced = True
        elif open_fence is not None and match and not match.group(2) and match.group(1).startswith(open_fence[0]):
            _paint_code(paint, text, open_fence[2], pos, open_fence[1])
            styles[pos:end] = ["fence"] * (end - pos)
            open_fence = None
    if open_fence is not None:
        _paint_code(paint, text, open_fence[2], len(text), open_fence[1])
    if code and not fenced:
        _paint_code(paint, text, 0, len(text), "")
    return styles


def _fenced(text: str) -> bool:
    return any(_FENCE.fullmatch(line.group()) for line in _LINE.finditer(text) if line.group())


@lru_cache(maxsize=4)
def answer_styles(text: str, code: bool) -> tuple[markdown.Markdown, StyleIds]:
    """The answer as shown and one style per shown character: markdown rendered (markdown.py)
    with its fenced code lexed in the fence's language; a code prompt's unfenced answer is all
    code and shown as written. Read-only: arms that give the same answer share it."""
    if code and not _fenced(text):
        styles = StyleIds(content_styles(text, code))
        anchors = markdown.Anchors()
        anchors.add(0, len(text), 1)
        return markdown.Markdown(text, styles, anchors), styles
    shown = markdown.render(text)
    styles = shown.styles.copy() if shown.code else shown.styles  # a copy only where code is painted
    for start, end, language in shown.code:
        _paint_code(styles.paint, shown.text, start, end, language)
    return shown, styles


def styled_stream(
    content: Sequence[str], reasoning: Sequence[str], tool: Sequence[str], code: bool
) -> tuple[str, StyleIds, array[int]]:
    """A run as one string in arrival order (per chunk: reasoning, answer, tool call).

    Returns the text, one style per character, and where each chunk's text ends. The answer is
    rendered and highlighted as a whole (answer_styles), so a token split across chunks is
    still coloured as one; each chunk shows the part of the rendered answer its source reaches
    (markdown.Markdown.offset), so markers never show and nothing shown changes later.
    Reasoning and tool calls are not markdown: they show as written. An answer alone is the
    rendered answer itself (its text and styles shared, not copied).
    """
    shown, shown_styles = answer_styles("".join(content), code)
    alone = not any(reasoning) and not any(tool)
    parts: list[str] = []
    styles = shown_styles if alone else StyleIds()
    ends = array("I")  # 4 bytes a chunk, not a list's 36
    used = at = total = 0
    for thought, answer, call in zip(reasoning, content, tool, strict=False):
        used += len(answer)
        upto = shown.offset(used)
        total += len(thought) + (upto - at) + len(call)
        ends.append(total)
        if not alone:
            parts += (thought, shown.text[at:upto], call)
            styles.run("reasoning", len(thought))
            styles.extend_from(shown_styles, at, upto)
            styles.run("tool", len(call))
        at = upto
    if alone:
        return shown.text[:total], shown_styles if total == len(shown_styles) else StyleIds(shown_styles[:total]), ends
    return "".join(parts), styles, ends
