"""Each arm against its memory-bandwidth limit at batch 1.

At batch 1 a decode step reads every weight once (and the KV cache of the context so far), so
the fastest a step can go is the GPUs' bandwidth over the bytes it reads:

    bytes per step = weights (+ the drafter's weights) + KV bytes per token x mean context
    limit (steps/s) = bandwidth / bytes per step
    tokens per step = 1, or a drafter arm's acceptance length
    limit (tok/s)   = limit (steps/s) x tokens per step
    % of the limit  = decode tok/s x (bytes per step / tokens per step) / bandwidth

The mean context of a step is the arm's counted runs' prompt tokens plus half their output.
Where the model's shape is unknown the KV cache is left out: the bytes are then a lower bound and
the limit an upper bound, and `bound` says so. A figure that cannot be had is None with the
reason and the key that would give it in `missing`, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import mean

from tokenreel.analysis.bandwidth import arm_bandwidth
from tokenreel.analysis.drafting import drafted_arm, drafts
from tokenreel.analysis.ladder import LadderRow
from tokenreel.analysis.metrics import output_tokens
from tokenreel.analysis.selection import DEFAULT_SELECTION, RunSelection
from tokenreel.analysis.weights import GB, Size, draft_weights, kv_bytes_per_token, target_weights
from tokenreel.session.model import Arm, Session

WEIGHTS_ONLY = "weights only (KV cache not counted): bytes a lower bound, limit an upper bound"


@dataclass(frozen=True)
class Roofline:
    """One arm's batch-1 roofline; every figure None where `missing` says why."""

    arm: str
    label: str
    drafter: bool
    card: str
    bandwidth_gbps: float | None
    bandwidth_source: str
    weights_bytes: float | None
    weights_source: str
    draft_bytes: float | None
    draft_source: str
    kv_bytes_per_context_token: float | None
    context_tokens: float | None
    kv_bytes: float | None  # per step, at the mean context
    kv_source: str
    bytes_per_step: float | None
    tokens_per_step: float | None
    bytes_per_token: float | None
    limit_steps_s: float | None
    limit_tok_s: float | None
    decode_tok_s: float | None
    steps_s: float | None
    pct_of_limit: float | None
    bound: str  # "" when the KV cache is counted, else WEIGHTS_ONLY
    missing: list[str] = field(default_factory=list)


def _context(session: Session, arm: Arm, selection: RunSelection) -> float | None:
    """Mean context of a decode step over the arm's counted runs: prompt tokens + half the output."""
    runs = [r for r in session.runs if r.arm == arm.id and selection.counts(r)]
    sizes = [r.usage["prompt_tokens"] + output_tokens(r) / 2 for r in runs if r.usage and "prompt_tokens" in r.usage]
    return mean(sizes) if sizes else None


def _weights(session: Session, arm: Arm) -> Size:
    """The arm's weights, else (a drafter arm) those of the arm it drafts for: the same target."""
    size = target_weights(arm)
    target = drafted_arm(session, arm)
    if size.bytes is None and target is not None:
        other = next((a for a in session.arms if a.id == target.arm), None)
        if other is not None and (theirs := target_weights(other)).bytes is not None:
            return Size(theirs.bytes, f"{theirs.source}, of {other.id} (the arm it drafts for)")
    return size


def arm_roofline(session: Session, arm: Arm, row: LadderRow | None, selection: RunSelection = DEFAULT_SELECTION) -> Roofline:
    """The roofline of one arm, its decode and acceptance from its ladder row."""
    missing: list[str] = []
    bandwidth = arm_bandwidth(arm)
    weights = _weights(session, arm)
    drafter = drafts(session, arm)
    draft = draft_weights(arm) if drafter else Size(0.0)
    kv = kv_bytes_per_token(arm)
    context = _context(session, arm, selection)
    for what in (bandwidth, weights, draft):
        if what.missing:
            missing.append(what.missing)
    kv_bytes = kv.bytes * context if kv.bytes is not None and context is not None else None
    if kv.bytes is not None and context is None:
        kv_note = "no counted run gave its prompt's token count"
    else:
        kv_note = kv.missing
    decode = row.decode_tok_s if row else None
    tokens_per_step = (row.acceptance_length if row else None) if drafter else 1.0
    if drafter and tokens_per_step is None:
        missing.append("no acceptance length counted for this drafter arm (its engine's spec-decode counters)")
    if decode is None:
        missing.append("no decode speed in its runs")
    per_step = weights.bytes + (draft.bytes or 0.0) + (kv_bytes or 0.0) if weights.bytes is not None and draft.bytes is not None else None
    bytes_s = bandwidth.gbps * GB if bandwidth.gbps is not None else None
    limit_steps = bytes_s / per_step if bytes_s and per_step else None
    per_token = per_step / tokens_per_step if per_step is not None and tokens_per_step else None
    steps = decode / tokens_per_step if decode is not None and tokens_per_step else None
    return Roofline(
        arm=arm.id, label=arm.label, drafter=drafter, card=bandwidth.card,
        bandwidth_gbps=bandwidth.gbps, bandwidth_source=bandwidth.source,
        weights_bytes=weights.bytes, weights_source=weights.source,
        draft_bytes=draft.bytes if drafter else None, draft_source=draft.source if drafter else "",
        kv_bytes_per_context_token=kv.bytes, context_tokens=context, kv_bytes=kv_bytes,
        kv_source=kv.source if kv_bytes is not None else kv_note,
        bytes_per_step=per_step, tokens_per_step=tokens_per_step, bytes_per_token=per_token,
        limit_steps_s=limit_steps,
        limit_tok_s=limit_steps * tokens_per_step if limit_steps is not None and tokens_per_step else None,
        decode_tok_s=decode, steps_s=steps,
        pct_of_limit=100 * steps / limit_steps if steps is not None and limit_steps else None,
        bound="" if kv_bytes is not None else WEIGHTS_ONLY,
        missing=missing,
    )


def rooflines(session: Session, ladder: list[LadderRow], selection: RunSelection = DEFAULT_SELECTION) -> list[Roofline]:
    """Every arm's roofline, in ladder order."""
    rows = {row.arm: row for row in ladder}
    return [arm_roofline(session, arm, rows.get(arm.id), selection) for arm in session.arms]
