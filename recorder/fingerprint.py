"""What an arm says about itself (engine version, model card, server args), kept with the session.

A recording is only comparable later if it says what was served: each engine answers a different
subset of /version (vLLM), /v1/models (max_model_len), /server_info (SGLang) and /props
(llama.cpp), so all are asked and whatever answers with JSON is kept. Failures are ignored:
the fingerprint is provenance, not a precondition. Anything that looks like a secret is dropped.
"""

from __future__ import annotations

import re
from typing import Any

import aiohttp
import orjson

from tokenreel.recorder.config import server_root
from tokenreel.recorder.sse_client import api_key, auth_headers
from tokenreel.archive import Arm

MAX_BODY_BYTES = 256 * 1024
MAX_STRING_CHARS = 2000
MAX_DEPTH = 6
SECRET_KEY = re.compile(
    r"api[_-]?key|secret|passw|auth|credential|cookie|bearer|(^|[_-])(access_)?token$", re.IGNORECASE
)
SECRET_VALUE = re.compile(r"^(sk-|hf_|ghp_|gho_|github_pat_|xox[abp]-|bearer\s)", re.IGNORECASE)


async def fingerprint(http: aiohttp.ClientSession, arm: Arm, timeout: float = 5.0) -> dict[str, Any]:
    """GET the arm's self-description endpoints; returns {probe: json, "max_model_len": n?}."""
    root = server_root(arm.base_url)
    probes = {
        "version": f"{root}/version",
        "models": f"{arm.base_url}/models",
        "server_info": f"{root}/server_info",
        "props": f"{root}/props",
    }
    key = api_key(arm)
    out: dict[str, Any] = {}
    for name, url in probes.items():
        data = await _get_json(http, url, auth_headers(arm), timeout)
        if isinstance(data, dict):
            out[name] = _clean(data, key, 0)
    length = _max_model_len(out.get("models"), arm.model)
    if length is not None:
        out["max_model_len"] = length
    return out


async def _get_json(http: aiohttp.ClientSession, url: str, headers: dict[str, str], timeout: float) -> Any:
    try:
        async with http.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            status, content = response.status, await response.read()
    except (aiohttp.ClientError, TimeoutError):  # aiohttp's total timeout is a bare TimeoutError
        return None
    if status != 200 or len(content) > MAX_BODY_BYTES:
        return None
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return None


def _clean(value: Any, key: str | None, depth: int) -> Any:
    """Drop secret-looking keys and values, cut long strings and deep nesting."""
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            return {}
        return {
            k: _clean(v, key, depth + 1)
            for k, v in value.items()
            if not SECRET_KEY.search(k) and not _secret_value(v, key)
        }
    if isinstance(value, list):
        return [] if depth >= MAX_DEPTH else [_clean(v, key, depth + 1) for v in value if not _secret_value(v, key)]
    if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
        return value[:MAX_STRING_CHARS] + "..."
    return value


def _secret_value(value: Any, key: str | None) -> bool:
    return isinstance(value, str) and (bool(SECRET_VALUE.match(value)) or (key is not None and key in value))


def _max_model_len(models: Any, model: str) -> int | None:
    """max_model_len of the arm's model in a /v1/models answer (vLLM, SGLang)."""
    if not isinstance(models, dict) or not isinstance(models.get("data"), list):
        return None
    cards = [c for c in models["data"] if isinstance(c, dict)]
    for card in sorted(cards, key=lambda c: c.get("id") != model):
        length = card.get("max_model_len")
        if isinstance(length, int) and not isinstance(length, bool):
            return length
    return None
