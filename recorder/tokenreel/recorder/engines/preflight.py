"""Check every arm before the first run: a missing key or a wrong model found after two arms were
recorded costs half an hour of GPU time, so all problems are found at once and listed together.

Per arm: its key variable is set, the endpoint answers `/v1/models` and serves the model, the
context length fits the longest prompt plus max_tokens (prompt lengths from vLLM's `/tokenize`
where it answers), and `/metrics` answers. A missing /metrics is a warning, not a problem: the
run can still be measured, but without the idle gate and the contention check, and that is said.

An arm with `launch` has no endpoint before its turn (recorder.launch): here only its key and its
command are checked; the endpoint checks (`check_arm`) run when its engine answers, and a problem
then fails that arm alone.
"""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import orjson

import tokenreel.base.version
from tokenreel.analysis.engine_figures import VLLM_PER_REQUEST_FLAG
from tokenreel.analysis.serving_config import serving_identity
from tokenreel.recorder.client.bounded_http import MAX_PREFLIGHT_BYTES, Refused, get_bounded
from tokenreel.recorder.client.request_body import api_key, auth_headers
from tokenreel.recorder.config import default_metrics_url, launch_of, server_root
from tokenreel.recorder.engines.engine_metrics import MetricsUnavailable, fetch_snapshot
from tokenreel.recorder.engines.fingerprint import card_context_length, fingerprint, scrubbed_argv
from tokenreel.recorder.enums import Api
from tokenreel.recorder.replicas import replica_arm, replica_name
from tokenreel.recorder.secrets import one_line
from tokenreel.recorder.suites import chat_messages, completion_text
from tokenreel.session.model import Arm, Prompt, Settings

TIMEOUT_S = 5.0


@dataclass
class ArmCheck:
    """What the preflight found for one arm: problems stop the recording, warnings do not."""

    arm: str
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was checked and passed, for --check


@dataclass(frozen=True)
class _Answer:
    status: int | None  # None: no HTTP answer at all
    body: Any = None  # parsed JSON, or None
    error: str = ""  # why there was no answer
    refused: bool = False  # the answer was refused (another server, over its read limit): error says why


async def preflight(arms: list[Arm], prompts: list[Prompt], settings: Settings) -> list[ArmCheck]:
    """Check the arms concurrently (each is a handful of GETs, no generation); config order kept."""
    headers = {"User-Agent": f"tokenreel/{tokenreel.base.version.__version__}"}
    # every replica's endpoint (recorder.replicas), each check named after its replica
    targets = [(replica_arm(arm, r), replica_name(arm.id, r)) if arm.replicas > 1 else (arm, arm.id)
               for arm in arms for r in range(arm.replicas)]
    async with aiohttp.ClientSession(headers=headers) as http:
        checks = list(await asyncio.gather(*(
            check_arm(http, arm, prompts, settings) if launch_of(arm) is None else _launched(arm) for arm, _ in targets
        )))
        identities = await asyncio.gather(*(_identity(http, arm) for arm in arms))
        replicas = [(arm, r) for arm in arms if arm.replicas > 1 and launch_of(arm) is None for r in range(1, arm.replicas)]
        replica_identities = await asyncio.gather(*(_identity(http, replica_arm(arm, r)) for arm, r in replicas))
    for check, (_, name) in zip(checks, targets, strict=False):
        check.arm = name
    _check_identical(checks, arms, identities)
    _check_replicas_alike(checks, replicas, replica_identities, dict(zip((a.id for a in arms), identities, strict=True)))
    return checks


def _check_replicas_alike(checks: list[ArmCheck], replicas: list[tuple[Arm, int]], identities: list[dict[str, str]],
                          firsts: dict[str, dict[str, str]]) -> None:
    """A replica whose engine says it serves otherwise than replica 0 (another version, dtype,
    config): its runs would be pooled with replica 0's in one cell, so it is a problem."""
    by_name = {c.arm: c for c in checks}
    for (arm, r), identity in zip(replicas, identities, strict=True):
        first = firsts[arm.id]
        differ = [f"{k} {identity.get(k, '(none)')} against {first.get(k, '(none)')}"
                  for k in sorted(set(first) | set(identity)) if identity.get(k) != first.get(k)]
        check = by_name.get(replica_name(arm.id, r))
        if differ and check is not None and not check.problems:
            check.problems.append(f"serves otherwise than replica 0 ({'; '.join(differ)}): its runs would be pooled with"
                                  " replica 0's; start every replica with the same engine, model and flags")


async def _identity(http: aiohttp.ClientSession, arm: Arm) -> dict[str, str]:
    """The arm's fingerprint as the report will state it (`serving_identity`): its endpoint's
    answers, or for a launched arm what its command says; with its model and declared settings."""
    launch = launch_of(arm)
    said = {"launch": scrubbed_argv(launch.argv)} if launch is not None else await fingerprint(http, arm)
    identity = serving_identity(replace(arm, fingerprint=said))
    return identity | {"model": arm.model} | {f"settings {k}": v for k, v in arm.settings.items()}


def _check_identical(checks: list[ArmCheck], arms: list[Arm], identities: list[dict[str, str]]) -> None:
    """Two reachable arms whose fingerprint, model and settings are all alike cannot be told apart
    in the report: said once, on the later arm, naming both."""
    usable = {c.arm for c in checks if not c.problems}
    seen: dict[tuple[tuple[str, str], ...], str] = {}
    by_arm = {c.arm: c for c in checks}
    for arm, identity in zip(arms, identities, strict=True):
        if arm.id not in usable and replica_name(arm.id, 0) not in usable:
            continue
        key = tuple(sorted(identity.items()))
        if key in seen:
            check = by_arm.get(arm.id) or by_arm[replica_name(arm.id, 0)]
            shown = " · ".join(f"{k} {v}" for k, v in identity.items() if k != "model") or "nothing"
            check.warnings.append(
                f"arms {seen[key]} and {arm.id} have identical fingerprints ({shown}) and the same model: the"
                " report cannot tell them apart; launch them with the flags that differ (--dtype, --quantization,"
                " --speculative-config) or declare what differs in [arms.settings]")
        else:
            seen[key] = arm.id


async def _launched(arm: Arm) -> ArmCheck:
    """An arm whose engine `record` launches at its turn: nothing answers before then, so only
    its key and its command are checked here; the endpoint checks run once it answers (runner)."""
    check = ArmCheck(arm.id)
    _check_key(check, arm)
    launch = launch_of(arm)
    assert launch is not None
    command = launch.argv[0]
    if shutil.which(command) is None:
        check.problems.append(f"launch: {command!r} is not an executable file nor on PATH; fix the arm's launch command")
    else:
        check.notes.append(f"launches {command} at its turn (endpoint checked once it answers)")
    _check_vllm_flags(check, list(launch.argv))
    return check


def _check_vllm_flags(check: ArmCheck, argv: list[str]) -> None:
    """A launched `vllm serve` without the flags that make it say its own per-request figures:
    without them the report has no engine agreement (and a drafter no acceptance per request)."""
    words = {word.split("=", 1)[0] for word in argv}
    if not any(word.rsplit("/", 1)[-1] == "vllm" for word in argv) or "serve" not in words:
        return
    if VLLM_PER_REQUEST_FLAG not in words:
        check.warnings.append(f"vllm serve without {VLLM_PER_REQUEST_FLAG}: no engine agreement for this arm; add the flag")
    drafter = bool(words & {"--speculative-config", "-sc"})
    if drafter and "--per-request-spec-decode-metrics" not in words:
        check.warnings.append("vllm serve with a drafter but without --per-request-spec-decode-metrics summary: its"
                              " acceptance comes from /metrics counters only; add the flag")


def _check_key(check: ArmCheck, arm: Arm) -> None:
    if arm.api_key_env and api_key(arm) is None:
        check.problems.append(
            f"environment variable {arm.api_key_env} (its api_key_env) is not set; export it, or remove"
            " api_key_env if the endpoint needs no key"
        )


async def check_arm(http: aiohttp.ClientSession, arm: Arm, prompts: list[Prompt], settings: Settings) -> ArmCheck:
    check = ArmCheck(arm.id)
    _check_key(check, arm)
    models_url = f"{arm.base_url}/models"
    answer = await _request(http, "GET", models_url, auth_headers(arm))
    if answer.refused:  # a redirect to another server, or an answer over its read limit
        check.problems.append(answer.error)
        return check
    if answer.status is None:
        check.problems.append(f"endpoint unreachable: {models_url} ({answer.error}); start the server or fix base_url")
        return check  # nothing else can answer either
    if answer.status in (401, 403):
        fix = f"check {arm.api_key_env}" if arm.api_key_env else "set api_key_env to the variable that holds the key"
        check.problems.append(f"{models_url} refused the request (HTTP {answer.status}); {fix}")
    elif answer.status != 200 or not isinstance(answer.body, dict):
        check.problems.append(
            f"{models_url} answered HTTP {answer.status} without a model list; is base_url the OpenAI API root"
            " (it usually ends in /v1)?"
        )
    else:
        card = _model_card(check, arm, answer.body)
        await _check_context(http, check, arm, card, prompts, settings)
        if card is not None and card.get("owned_by") == "vllm":  # the flag is not to be seen before a run
            check.notes.append(f"vLLM: its own per-request timing (engine agreement) needs {VLLM_PER_REQUEST_FLAG}")
    await _check_metrics(http, check, arm)
    return check


def _model_card(check: ArmCheck, arm: Arm, models: dict[str, Any]) -> dict[str, Any] | None:
    """The served card of the arm's model; a problem when the endpoint serves other models.

    llama.cpp's server answers every request with its one model, whatever the request names,
    so there a different name is only a warning.
    """
    cards = [c for c in models.get("data") or [] if isinstance(c, dict) and isinstance(c.get("id"), str)]
    for card in cards:
        if card["id"] == arm.model:
            check.notes.append(f"serves {arm.model}")
            return card
    served = ", ".join(c["id"] for c in cards) or "none"
    if len(cards) == 1 and cards[0].get("owned_by") == "llamacpp":
        check.warnings.append(f"llama.cpp serves {served} whatever the request names (model = {arm.model!r})")
        return cards[0]
    check.problems.append(f"model {arm.model!r} is not served at {arm.base_url}; it serves: {served}; fix model")
    return None


async def _check_context(
    http: aiohttp.ClientSession,
    check: ArmCheck,
    arm: Arm,
    card: dict[str, Any] | None,
    prompts: list[Prompt],
    settings: Settings,
) -> None:
    """The context (vLLM/SGLang max_model_len, llama.cpp meta.n_ctx) must hold the longest prompt
    plus the forced output length."""
    length = card_context_length(card)
    if length is None:
        return  # the engine does not say: nothing to contradict
    longest = await _longest_prompt_tokens(http, arm, prompts)
    need = settings.max_tokens + (longest or 0)
    counted = f" + the longest prompt, {longest} tokens" if longest is not None else " (prompt lengths unknown: no /tokenize)"
    if need > length:
        check.problems.append(
            f"max_model_len {length} < max_tokens {settings.max_tokens}{counted}; lower max_tokens or serve a longer"
            " context"
        )
    else:
        check.notes.append(f"context {length} tokens holds max_tokens {settings.max_tokens}{counted}")


async def _longest_prompt_tokens(http: aiohttp.ClientSession, arm: Arm, prompts: list[Prompt]) -> int | None:
    """Prompt lengths as the engine counts them, from vLLM's /tokenize; None if it does not answer."""
    url = f"{server_root(arm.base_url)}/tokenize"
    longest = 0
    for prompt in prompts:
        body: dict[str, Any] = {"model": arm.model}
        if arm.api == Api.CHAT:
            body["messages"] = chat_messages(prompt)
        else:
            body["prompt"] = completion_text(prompt)
        answer = await _request(http, "POST", url, auth_headers(arm), body)
        count = answer.body.get("count") if answer.status == 200 and isinstance(answer.body, dict) else None
        if not isinstance(count, int) or isinstance(count, bool):
            return None
        longest = max(longest, count)
    return longest


async def _check_metrics(http: aiohttp.ClientSession, check: ArmCheck, arm: Arm) -> None:
    url = arm.metrics_url or default_metrics_url(arm.base_url)
    try:
        await fetch_snapshot(http, url, TIMEOUT_S)
    except MetricsUnavailable as exc:
        check.warnings.append(
            f"{exc}: the idle gate and the contention check will be unavailable for this arm (runs are marked so);"
            " start SGLang with --enable-metrics, llama.cpp with --metrics, or set metrics_url"
        )
    else:
        check.notes.append(f"/metrics answers at {url}")


async def _request(
    http: aiohttp.ClientSession, method: str, url: str, headers: dict[str, str], body: Any = None
) -> _Answer:
    """One bounded request; never raises for network trouble (that is what is being checked)."""
    data = None if body is None else orjson.dumps(body)
    if data is not None:
        headers = {**headers, "Content-Type": "application/json"}
    try:
        status, content = await get_bounded(
            http, url, f"the answer of {url}", MAX_PREFLIGHT_BYTES, TIMEOUT_S, headers, method, data
        )
    except Refused as exc:
        return _Answer(None, error=str(exc), refused=True)
    except aiohttp.ClientConnectorError as exc:
        return _Answer(None, error=_connect_reason(exc))
    except (aiohttp.ClientError, TimeoutError) as exc:  # aiohttp's total timeout is a bare TimeoutError
        return _Answer(None, error=type(exc).__name__ if str(exc) == "" else one_line(str(exc).splitlines()[0], 200))
    try:
        return _Answer(status, orjson.loads(content))
    except orjson.JSONDecodeError:
        return _Answer(status)


def _connect_reason(exc: aiohttp.ClientConnectorError) -> str:
    if isinstance(exc.os_error, ConnectionRefusedError):
        return "connection refused"
    return (exc.os_error.strerror if exc.os_error and exc.os_error.strerror else str(exc.os_error or exc)).lower()
