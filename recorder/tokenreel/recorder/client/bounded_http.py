"""Small bounded HTTP reads: every answer the recorder reads besides the stream itself.

THE READ BOUNDS RULE: every read from the network has a bound that says what it is, is read
incrementally and stops at the bound with a one-line reason (`read_bounded`); a stream is bounded
per line (`stream.MAX_SSE_LINE_BYTES`), per run in events, bytes and tokens while it streams
(`run_bounds`) and in time (the timeouts). THE REDIRECT RULE: a redirect to another scheme, host
or port is refused (it would measure another server); one within the same server is followed,
at most MAX_REDIRECTS times.
"""

from __future__ import annotations

import aiohttp
from yarl import URL

from tokenreel.recorder.secrets import one_line

MAX_ERROR_BODY_BYTES = 64 << 10  # an HTTP error answer: only its message is wanted
MAX_METRICS_BYTES = 8 << 20  # /metrics of a busy vLLM with many LoRA labels is ~1 MiB
MAX_FINGERPRINT_BYTES = 256 << 10  # /version, /v1/models, /server_info, /props each
MAX_PREFLIGHT_BYTES = 1 << 20  # /v1/models (many models), /tokenize
MAX_REDIRECTS = 5


class Refused(Exception):
    """A body over its read bound, or a redirect to another server; the message is one line."""


async def read_bounded(response: aiohttp.ClientResponse, limit: int, what: str) -> bytes:
    """The body, read piece by piece; Refused as soon as it passes `limit` bytes (the connection
    is then closed, not drained)."""
    if response.content_length is not None and response.content_length > limit:
        raise Refused(f"{what} of {response.content_length} bytes is over the {_size(limit)} read limit; not read")
    body = bytearray()
    while piece := await response.content.read(limit + 1 - len(body)):
        body += piece
        if len(body) > limit:
            raise Refused(f"{what} is over the {_size(limit)} read limit; not read further")
    return bytes(body)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def redirect_target(response: aiohttp.ClientResponse) -> str | None:
    """Where a 3xx answer points (absolute), or None when it is no redirect; Refused when it
    points to another scheme, host or port."""
    if response.status not in (301, 302, 303, 307, 308):
        return None
    location = response.headers.get("Location", "")
    url = response.url
    try:
        target = url.join(URL(location)) if location else None
    except ValueError:
        target = None
    if target is None or not target.host:
        raise Refused(f"HTTP {response.status} from {url} redirects nowhere usable; fix base_url")
    if (target.scheme, target.host, target.port) != (url.scheme, url.host, url.port):
        origin = f"{target.scheme}://{target.host}:{target.port}"
        raise Refused(
            f"HTTP {response.status} from {url} redirects to another server ({one_line(origin, 120)}); refused,"
            " it would measure that server: fix base_url (or metrics_url) to the server itself"
        )
    return str(target)


async def get_bounded(
    http: aiohttp.ClientSession, url: str, what: str, limit: int, timeout: float,
    headers: dict[str, str] | None = None, method: str = "GET", data: bytes | None = None,
) -> tuple[int, bytes]:
    """(status, body) of a small request: redirects within the server followed, others refused
    (Refused), the body bounded; aiohttp and timeout errors propagate."""
    client_timeout = aiohttp.ClientTimeout(total=timeout)
    for _ in range(MAX_REDIRECTS + 1):
        async with http.request(
            method, url, headers=headers, data=data, timeout=client_timeout, allow_redirects=False
        ) as response:
            target = redirect_target(response)
            if target is None:
                return response.status, await read_bounded(response, limit, what)
        url = target
    raise Refused(f"{what}: more than {MAX_REDIRECTS} redirects; fix the URL")
