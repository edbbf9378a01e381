"""What an arm says about itself (engine version, model card, server args), kept with the session.

A recording is only comparable later if it says what was served: each engine answers a different
subset of /version (vLLM), /v1/models (max_model_len), /server_info (SGLang) and /props
(llama.cpp), so all are asked and whatever answers with JSON is kept. Failures are ignored:
the fingerprint is provenance, not a precondition. Anything that looks like a secret is dropped,
and the values of secret flags in a launch command (SGLang's `launch_command`: `--api-key X`)
are scrubbed so the rest of the command is kept. An arm that `record` launched (recorder.launch)
also keeps its own command as `launch`, scrubbed the same way (`scrubbed_argv`).

`summary` condenses it into what tells two arms apart (engine, version, context, quantization,
speculative decoding): the Q4_0 arm and the Q4_0 + draft arm differ in llama.cpp's /props
speculative settings, or SGLang's speculative_* server args. A llama.cpp build configured
without its build number and commit ("b0-unknown") is said as unknown (`stated_version`); a
drafter the stream shows is named as observed by the report, whatever /props says
(`tokenreel.analysis.engine_figures.arm_fingerprint`): a server started with -md reports
`speculative.types: "none"`. vLLM exposes neither its
quantization nor its speculative config on these endpoints: declare them in `[arms.settings]`.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from tokenreel.analysis.engine_figures import stated_version
from tokenreel.recorder.client.bounded_http import MAX_FINGERPRINT_BYTES, Refused, get_bounded
from tokenreel.recorder.client.request_body import api_key, auth_headers
from tokenreel.recorder.config import server_root
from tokenreel.recorder.enums import EngineKind
from tokenreel.recorder.secrets import (
    SECRET_MASK,
    SECRET_VALUE,
    is_secret_flag,
    looks_secret,
    scrub_env_assignment,
    scrub_secret_flags,
    scrub_secrets,
)
from tokenreel.session.model import Arm

MAX_STRING_CHARS = 2000
MAX_DEPTH = 6


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
    unread: dict[str, str] = {}
    for name, url in probes.items():
        data = await _get_json(http, url, auth_headers(arm), timeout, unread, name)
        if isinstance(data, dict):
            out[name] = _clean(data, key, 0)
    if unread:
        out["unread"] = unread  # why an answer was not kept (over the read limit, another server)
    length = _max_model_len(out.get("models"), arm.model)
    if length is None:
        length = _first_int(out, ("props", "default_generation_settings", "n_ctx"), ("server_info", "context_length"))
    if length is not None:
        out["max_model_len"] = length
    summary = summarize(out, arm.model)
    if summary:
        out["summary"] = summary
    return out


def summarize(fp: dict[str, Any], model: str = "") -> dict[str, str]:
    """What tells arms apart, as short strings: engine, version, max_model_len, model_file,
    quantization, dtype, kv_cache_dtype, speculative. Only what the endpoints said."""
    engine = engine_of(fp)
    out: dict[str, str] = {"engine": engine} if engine else {}
    version = _first(fp, ("version", "version"), ("server_info", "version"), ("props", "build_info"))
    if version is not None:
        out["version"] = stated_version(str(version))
    if isinstance(fp.get("max_model_len"), int):
        out["max_model_len"] = str(fp["max_model_len"])
    card = _card(fp.get("models"), model)
    path = _first(fp, ("props", "model_path"))
    if isinstance(path, str):
        out["model_file"] = path.rsplit("/", 1)[-1]
    quant = _first(fp, ("server_info", "quantization"))
    ftype = card.get("meta", {}).get("ftype") if isinstance(card.get("meta"), dict) else None
    if quant is None and isinstance(ftype, (str, int)):
        quant = f"gguf ftype {ftype}"
    if quant is not None:
        out["quantization"] = str(quant)
    for key in ("dtype", "kv_cache_dtype"):
        value = _first(fp, ("server_info", key))
        if value not in (None, "auto"):
            out[key] = str(value)
    spec = _speculative(fp, engine)
    if spec:
        out["speculative"] = spec
    return out


def engine_of(fp: dict[str, Any]) -> EngineKind:
    """The engine that answered, from what its endpoints said (its models' owned_by first)."""
    models = fp.get("models")
    owners = {c.get("owned_by") for c in models.get("data", []) if isinstance(c, dict)} if isinstance(models, dict) else set()
    props, info = fp.get("props"), fp.get("server_info")
    if "llamacpp" in owners or (isinstance(props, dict) and "default_generation_settings" in props):
        return EngineKind.LLAMACPP
    if "sglang" in owners or (isinstance(info, dict) and ("internal_states" in info or "speculative_algorithm" in info)):
        return EngineKind.SGLANG
    if "vllm" in owners or isinstance(fp.get("version"), dict):
        return EngineKind.VLLM
    return EngineKind.UNKNOWN


def _speculative(fp: dict[str, Any], engine: EngineKind) -> str:
    """Speculative-decoding settings where the engine exposes them; "off" when it says none."""
    if engine is EngineKind.SGLANG:
        info = fp.get("server_info") or {}
        algorithm = info.get("speculative_algorithm")
        if not algorithm:
            return "off" if "speculative_algorithm" in info else ""
        parts = [str(algorithm)]
        for key, label in (("speculative_draft_model_path", "draft"), ("speculative_num_steps", "steps"),
                           ("speculative_eagle_topk", "topk"), ("speculative_num_draft_tokens", "draft tokens")):
            if info.get(key) is not None:
                parts.append(f"{label} {info[key]}")
        return ", ".join(parts)
    if engine is EngineKind.LLAMACPP:
        props = fp.get("props") or {}
        settings = props.get("default_generation_settings") or {}
        params = settings.get("params") or {} if isinstance(settings, dict) else {}
        declared = props.get("speculative", settings.get("speculative") if isinstance(settings, dict) else None)
        if isinstance(declared, dict):  # builds that describe the draft settings directly
            return "draft model, " + ", ".join(f"{k} {v}" for k, v in declared.items()) if declared else "draft model"
        limits = ", ".join(
            f"{key.split('.')[-1]} {params[key]}" for key in ("speculative.n_max", "speculative.n_min", "speculative.p_min")
            if isinstance(params, dict) and key in params
        )
        if declared is True:
            return "draft model" + (f", {limits}" if limits else "")
        if declared is False or "speculative" in props:
            return "off"
    return ""


def card_context_length(card: dict[str, Any] | None) -> int | None:
    """A model card's context length: vLLM and SGLang `max_model_len`, llama.cpp `meta.n_ctx`."""
    if not isinstance(card, dict):
        return None
    meta = card.get("meta")
    for value in (card.get("max_model_len"), meta.get("n_ctx") if isinstance(meta, dict) else None):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _card(models: Any, model: str) -> dict[str, Any]:
    if not isinstance(models, dict) or not isinstance(models.get("data"), list):
        return {}
    cards = [c for c in models["data"] if isinstance(c, dict)]
    return next((c for c in cards if c.get("id") == model), cards[0] if len(cards) == 1 else {})


def _first(fp: dict[str, Any], *paths: tuple[str, ...]) -> Any:
    """The first present, non-null value among nested key paths."""
    for path in paths:
        value: Any = fp
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            return value
    return None


def _first_int(fp: dict[str, Any], *paths: tuple[str, ...]) -> int | None:
    for path in paths:
        value = _first(fp, path)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


async def _get_json(
    http: aiohttp.ClientSession, url: str, headers: dict[str, str], timeout: float, unread: dict[str, str], name: str
) -> Any:
    try:
        status, content = await get_bounded(http, url, f"the answer of {url}", MAX_FINGERPRINT_BYTES, timeout, headers)
    except Refused as exc:
        unread[name] = str(exc)
        return None
    except (aiohttp.ClientError, TimeoutError):  # aiohttp's total timeout is a bare TimeoutError
        return None
    if status != 200:
        return None
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return None


def scrubbed_argv(argv: tuple[str, ...] | list[str]) -> list[str]:
    """A launch command as the fingerprint keeps it: secret flags' values masked, keys dropped."""
    cleaned: list[str] = _clean(list(argv), None, 0)  # a list of strings stays one
    return cleaned


def _clean(value: Any, key: str | None, depth: int) -> Any:
    """Drop secret-looking keys and values (judged whole, before any cut), cut long strings and
    deep nesting."""
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            return {}
        out = {}
        for k, v in value.items():
            # A key that looks secret by name, or that IS a secret (a server keyed by the API key).
            if looks_secret(k) or _secret_value(k, key) or _secret_value(v, key):
                continue
            out[k] = _clean(v, key, depth + 1)
        return out
    if isinstance(value, list):
        if depth >= MAX_DEPTH:
            return []
        items = [_clean(v, key, depth + 1) for v in value]
        # argv lists: ["--api-key", "X"] keeps the flag, scrubs its value
        items = [SECRET_MASK if i and isinstance(items[i - 1], str) and is_secret_flag(items[i - 1]) else v
                 for i, v in enumerate(items)]
        masked = f"={SECRET_MASK}"  # an environment assignment with its value masked stays: its name says what ran
        return [v for v, raw in zip(items, value, strict=False)
                if v == SECRET_MASK or (isinstance(v, str) and v != raw and v.endswith(masked)) or not _secret_value(raw, key)]
    if isinstance(value, str):
        value = scrub_env_assignment(scrub_secrets(value))  # before the cut below: no part of a key survives
        if "-" in value:
            value = scrub_secret_flags(value)
        if len(value) > MAX_STRING_CHARS:
            return value[:MAX_STRING_CHARS] + "..."
    return value


def _secret_value(value: Any, key: str | None) -> bool:
    """A string that looks like a key or holds a known secret (the arm's key among them)."""
    return isinstance(value, str) and (
        bool(SECRET_VALUE.match(value)) or (key is not None and key in value) or scrub_secrets(value) != value
    )


def _max_model_len(models: Any, model: str) -> int | None:
    """Context length of the arm's model in a /v1/models answer (vLLM, SGLang; llama.cpp meta.n_ctx)."""
    if not isinstance(models, dict) or not isinstance(models.get("data"), list):
        return None
    cards = [c for c in models["data"] if isinstance(c, dict)]
    for card in sorted(cards, key=lambda c: c.get("id") != model):
        length = card_context_length(card)
        if length is not None:
            return length
    return None
