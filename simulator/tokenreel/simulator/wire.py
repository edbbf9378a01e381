"""Bytes and JSON that every simulated engine shape shares (no engine specifics here).

Kept apart from the server so that each engine shape module only says what differs between
vLLM, SGLang and llama.cpp, and the server only says when things happen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import orjson
from aiohttp import web

from tokenreel.simulator.answer_text import token_id

SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
DONE = b"data: [DONE]\n\n"


class BadRequest(Exception):
    """A request the engine would reject with 400."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(obj), status=status, headers=headers, content_type="application/json"
    )


def openai_error(
    status: int,
    message: str,
    err_type: str,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    """vLLM's (and SGLang's) ErrorResponse shape."""
    body = {"error": {"message": message, "type": err_type, "param": param, "code": status}}
    return json_response(body, status, headers)


def sse(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


async def sleep_until(target: float) -> None:
    """Sleep to an absolute loop time so lateness in one step is not carried into the next."""
    delay = target - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)


def logprob(piece: str) -> float:
    """A deterministic, plausible log-probability for a piece."""
    return -(token_id(piece) % 1000) / 4000


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }


def hang_up(request: web.Request) -> None:
    """Close the connection without finishing the response, like a crashed server."""
    if request.transport is not None:
        request.transport.abort()


def ends_mid_utf8(tokens: Sequence[str], i: int) -> bool:
    """Whether token i ends inside a multi-byte character (byte-level BPE splits one).

    The simulated vocabulary is whole characters, so the split is modelled on the token before
    a non-ASCII one: its text cannot be shown until the next token completes the character.
    Engines hold such text back (vLLM sends an empty-text chunk, llama.cpp no event at all).
    """
    return i + 1 < len(tokens) and not tokens[i + 1].isascii()


def format_g6(value: float) -> str:
    """A double as C++ `std::stringstream << value` prints it: 6 significant digits (%g)."""
    return format(value, ".6g")
