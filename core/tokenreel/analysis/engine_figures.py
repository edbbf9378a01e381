"""The engine's own word beside tokenreel's measurement: decode agreement, prompt-cache
hits, a drafter seen in the stream, and builds that do not know their version.

Every figure here comes from `Run.engine` (what the engine said of each request) and
`Run.acceptance`; nothing is guessed where the engine said nothing: a reason is given instead.
"""

from __future__ import annotations

import re
from statistics import median
from typing import Any, NotRequired, TypedDict

from tokenreel.analysis.metrics import run_metrics
from tokenreel.analysis.selection import RunSelection
from tokenreel.analysis.serving_config import serving_identity
from tokenreel.session.model import Run, Session

# What each prompt-cache policy (`Settings.prompt_cache`) means, as every view says it.
PROMPT_CACHE_TEXT = {
    "fresh": "every run a fresh prefill (llama.cpp arms are sent cache_prompt: false, vLLM arms a cache_salt"
    " of their own; SGLang's prefix cache is a server flag: cache hits are flagged)",
    "engine": "the engines' own prompt-cache defaults (recorded before tokenreel asked for a fresh prefill)",
}
# What a vLLM arm without its own per-request timing needs, as every view says it.
VLLM_PER_REQUEST_FLAG = "--enable-per-request-metrics"
VLLM_PER_REQUEST_NOTE = f"vLLM sends its per-request timing only when started with {VLLM_PER_REQUEST_FLAG}"
# llama.cpp's build_info is "b<number>-<commit>"; a build configured without them says "b0-unknown".
_LLAMACPP_BUILD = re.compile(r"b(\d+)-(.+)")


class EngineAgreement(TypedDict):
    """One arm's row of `engine_agreement` (a JSON object of the report)."""

    arm: str
    runs: int
    median_pct: float | None
    worst_pct: float | None
    note: NotRequired[str]


class ArmCache(TypedDict):
    """One arm's row of `prompt_cache`."""

    arm: str
    runs: int
    known: int
    cache_hits: int
    max_cached_tokens: int | None
    note: NotRequired[str]


class PromptCache(TypedDict):
    """The session's prompt-cache policy, said in words, and each arm's cache hits."""

    policy: str
    policy_text: str
    arms: list[ArmCache]


def _measured(session: Session, arm: str) -> list[Run]:
    return [r for r in session.runs if r.arm == arm and not r.warmup and r.status == "ok"]


def engine_agreement(session: Session, selection: RunSelection) -> list[EngineAgreement]:
    """Per arm: tokenreel's decode tok/s against the engine's own for the same request, in percent.

    Over the measured runs in the figures that both gave a decode rate: `median_pct` and
    `worst_pct` of |tokenreel / engine - 1| x 100. Both sides count the tokens after the first
    over the first token to the last (`EngineFigures`). `note` says why an arm has no runs.
    """
    out: list[EngineAgreement] = []
    for arm in session.arms:
        runs = [r for r in _measured(session, arm.id) if selection.counts(r)]
        differences = []
        for run in runs:
            theirs = run.engine.decode_tok_s if run.engine else None
            ours = run_metrics(run).decode_tok_s
            if theirs and ours is not None:
                differences.append(abs(ours / theirs - 1) * 100)
        entry: EngineAgreement = {
            "arm": arm.id,
            "runs": len(differences),
            "median_pct": median(differences) if differences else None,
            "worst_pct": max(differences) if differences else None,
        }
        if not differences:
            entry["note"] = _no_engine_decode(runs, engine_name(arm.fingerprint))
        out.append(entry)
    return out


def engine_name(fingerprint: dict[str, Any]) -> str:
    """The engine an arm's fingerprint names ("vllm", "sglang", "llamacpp"), or ""."""
    summary = fingerprint.get("summary") if isinstance(fingerprint, dict) else None
    name = summary.get("engine") if isinstance(summary, dict) else None
    return name if isinstance(name, str) else ""


def _no_engine_decode(runs: list[Run], engine: str) -> str:
    if not runs:
        return "no measured run in the figures"
    if all(r.engine is None for r in runs):
        return "recorded before tokenreel archived the engine's figures"
    sources = sorted({r.engine.source for r in runs if r.engine and r.engine.source})
    if engine == "vllm":
        return f"{VLLM_PER_REQUEST_NOTE} (it sent only {', '.join(sources) or 'no per-request figures'})"
    if sources:
        return f"the engine gives no per-request decode rate (it sent only {', '.join(sources)})"
    return "the engine sent no per-request figures (no llama.cpp timings, no usage prompt details)"


def prompt_cache(session: Session) -> PromptCache:
    """The session's prompt-cache policy and, per arm, how many measured runs' TTFT included a cache hit."""
    arms: list[ArmCache] = []
    for arm in session.arms:
        runs = _measured(session, arm.id)
        known = [r for r in runs if r.engine is not None and r.engine.cached_prompt_tokens is not None]
        hits = [r for r in known if r.engine and r.engine.cache_hit]
        entry: ArmCache = {"arm": arm.id, "runs": len(runs), "known": len(known), "cache_hits": len(hits),
                       "max_cached_tokens": max((r.engine.cached_prompt_tokens or 0 for r in hits if r.engine), default=None)}
        if runs and not known:
            entry["note"] = ("recorded before tokenreel archived the engine's figures" if all(r.engine is None for r in runs)
                             else "the engine does not say which prompt tokens came from its cache")
        arms.append(entry)
    policy = session.settings.prompt_cache
    return {"policy": policy, "policy_text": PROMPT_CACHE_TEXT[policy], "arms": arms}


def observed_drafter(session: Session, arm: str) -> str:
    """"" unless the arm's own stream showed drafting: then what it showed (drafts in llama.cpp's
    timings, vLLM's or SGLang's per-request spec counters), whatever its /props said."""
    runs = [r for r in session.runs if r.arm == arm and r.status == "ok"]
    drafted = [r for r in runs if r.acceptance is not None and (r.acceptance.draft_tokens or r.acceptance.drafts)]
    if not drafted:
        return ""
    sources = ", ".join(sorted({r.acceptance.source for r in drafted if r.acceptance}))
    return f"drafter observed in the stream ({len(drafted)} of {len(runs)} runs drafted, {sources})"


def stated_version(version: str) -> str:
    """A version string as it may be said: a llama.cpp build configured without its number and
    commit ("b0-unknown") is said as unknown, never passed off as a version."""
    match = _LLAMACPP_BUILD.fullmatch(version)
    if match is None:
        return version
    number, commit = match[1], match[2]
    if number == "0" and commit == "unknown":
        return f"unknown (the build says {version}: configured without its build number and commit)"
    if number == "0":
        return f"commit {commit} (build number unknown)"
    if commit == "unknown":
        return f"b{number} (commit unknown)"
    return version


def arm_fingerprint(session: Session, arm: str) -> dict[str, str]:
    """The fingerprint as the report states it (`serving_identity`: the endpoints' summary, the
    launch command's dtype, quantization and speculative settings, vLLM's config hash, the
    synthetic-acceptance label): the version as `stated_version` says it, and a drafter seen in
    the stream named as observed, with what the endpoint said beside it."""
    out = serving_identity(session.arm(arm))
    if "version" in out:
        out["version"] = stated_version(out["version"])
    observed = observed_drafter(session, arm)
    if observed:
        said = out.get("speculative")
        out["speculative"] = observed + (f"; the endpoint said {said!r}" if said else "")
    return out
