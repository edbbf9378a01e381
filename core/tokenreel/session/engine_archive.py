"""Reading back what an engine said of one request (`EngineFigures`), every field bounded.

A decode rate above MAX_TOKENS_PER_SECOND, a prompt count above MAX_COUNT or more cached prompt
tokens than prompt tokens fails the load like any impossible value (`tokenreel.session.validate`, rule 3).
"""

from __future__ import annotations

from typing import Any

from tokenreel.session.fields import FieldReader
from tokenreel.session.model import ENGINE_DURATIONS, MAX_COUNT, MAX_ENGINE_MS, MAX_TOKENS_PER_SECOND, EngineFigures


def read_engine_figures(r: FieldReader, data: Any, where: str) -> EngineFigures | None:
    """The archived `Run.engine` (docs/session-format.md §7.7); None for runs recorded before tokenreel archived it."""
    if data is None:
        return None
    d = r.obj(data, where)
    figures = EngineFigures(
        decode_tok_s=r.get(d, "decode_tok_s", where, r.opt_num, None),
        prompt_tokens=r.get(d, "prompt_tokens", where, r.opt_int, None),
        cached_prompt_tokens=r.get(d, "cached_prompt_tokens", where, r.opt_int, None),
        source=r.get(d, "source", where, r.str_, ""),
        ttft_ms=r.get(d, "ttft_ms", where, r.opt_num, None),
        queue_ms=r.get(d, "queue_ms", where, r.opt_num, None),
        generation_ms=r.get(d, "generation_ms", where, r.opt_num, None),
    )
    if figures.decode_tok_s is not None and figures.decode_tok_s > MAX_TOKENS_PER_SECOND:
        raise r.fail(f"{where}.decode_tok_s", f"{figures.decode_tok_s:g} tok/s is more than the limit of {MAX_TOKENS_PER_SECOND:,}")
    for name in ENGINE_DURATIONS:
        value = getattr(figures, name)
        if value is not None and value > MAX_ENGINE_MS:
            raise r.fail(f"{where}.{name}", f"{value:g} ms is more than a week")
    for name in ("prompt_tokens", "cached_prompt_tokens"):
        value = getattr(figures, name)
        if value is not None and value > MAX_COUNT:
            raise r.fail(f"{where}.{name}", f"{value} tokens is more than the limit of {MAX_COUNT}")
    prompt, cached = figures.prompt_tokens, figures.cached_prompt_tokens
    if prompt is not None and cached is not None and cached > prompt:
        raise r.fail(f"{where}.cached_prompt_tokens", f"{cached} cached tokens of a {prompt}-token prompt")
    return figures
