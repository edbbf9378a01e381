"""A sweep's report as data: one row per arm and level.

Each row: the level's record (`model.LevelRecord`: status, error, requests completed and failed),
and from its measured requests that completed (warmup left out, every failed one too):
- `aggregate_output_tok_s`: their output tokens over the measured window, from the first
  request's send to the last one's last event (the runs' own monotonic times; the level's
  recorded wall time when a run lacks them): what the endpoint served per second at that level;
- `median_decode_tok_s`, `median_ttft_s`: the per-request medians (`metrics.run_metrics`);
- the engine's counter differences over the window (`generated_tokens`, `drafts`,
  `draft_tokens`, `accepted_tokens`; None where /metrics lacked one) and the acceptance length
  they give (1 + accepted / drafts), and the running/waiting gauges' peaks.
- `mean_decode_tok_s` (what the ratios compare), `ttft_ms` and `tpot_ms`: p50, p90, p99 over the
  requests (`latency.distribution`, one sample a request);
- `drafts_per_step`: drafts / decode steps, 0 when drafting is off. All from the counters over
  the level (warmup requests included, as the counters see them): decode steps = generated tokens
  - requests (a first token comes from prefill) - accepted tokens (a drafting step emits 1 +
  its accepted tokens, a plain one 1). Drafts / (tokens - requests) would be drafts per token,
  about 1 / acceptance length while drafting: not "per step".
The arms compared level by level, and the crossovers, are `report.sweep_compare`.
"""

from __future__ import annotations

import statistics
from typing import Any

import orjson

from tokenreel.analysis.latency import distribution, once
from tokenreel.analysis.metrics import NS_PER_S, run_metrics
from tokenreel.report.sweep_compare import crossovers, sentence
from tokenreel.report.sweep_schedule import sweep_schedule
from tokenreel.session.model import LevelRecord, Run, Session

COUNTER_DELTAS = ("generated_tokens", "drafts", "draft_tokens", "accepted_tokens")


def sweep_rows(session: Session) -> list[dict[str, Any]]:
    """One row per level record, in recording order (arm by arm, levels rising)."""
    return [_row(session, record) for record in session.levels]


def _row(session: Session, record: LevelRecord) -> dict[str, Any]:
    runs = [r for r in session.runs if r.arm == record.arm and r.level == record.level and not r.warmup and r.status == "ok"]
    metrics = [run_metrics(run) for run in runs]
    tokens = sum(m.output_tokens for m in metrics)
    window = _window_s(runs, record)
    deltas = {name: _delta(record, name) for name in COUNTER_DELTAS}
    drafts, accepted = deltas["drafts"], deltas["accepted_tokens"]
    decode = [m.decode_tok_s for m in metrics if m.decode_tok_s is not None]
    return {
        "arm": record.arm,
        "label": session.arm(record.arm).label,
        "level": record.level,
        "status": record.status,
        "error": record.error,
        "completed": record.completed,
        "failed": record.failed,
        "output_tokens": tokens,
        "window_s": window,
        "aggregate_output_tok_s": tokens / window if runs and window else None,
        "median_decode_tok_s": _median([m.decode_tok_s for m in metrics]),
        "median_ttft_s": _median([m.ttft_s for m in metrics]),
        "mean_decode_tok_s": statistics.fmean(decode) if decode else None,
        "decode_tok_s": decode,  # per request: the intervals' sample (left out of the json)
        "ttft_ms": _percentiles([m.ttft_s * 1000 for m in metrics if m.ttft_s is not None]),
        "tpot_ms": _percentiles([m.tpot_ms for m in metrics if m.tpot_ms is not None]),
        "drafts_per_step": _drafts_per_step(session, record, deltas),
        "counters": deltas,
        "acceptance_length": 1 + accepted / drafts if drafts and accepted is not None else None,
        "peak_running": record.peak_running,
        "peak_waiting": record.peak_waiting,
        "metrics_note": record.metrics_note,
    }


def _window_s(runs: list[Run], record: LevelRecord) -> float | None:
    """First send to last event of the runs, in seconds; the recorded wall time otherwise."""
    timed = [(r.send_monotonic_ns, r.chunks.t_ns[-1]) for r in runs if r.send_monotonic_ns is not None and len(r.chunks)]
    if runs and len(timed) == len(runs):
        start = min(send for send, _ in timed)
        end = max(send + last for send, last in timed)
        return (end - start) / NS_PER_S if end > start else None
    return record.wall_s


def _delta(record: LevelRecord, name: str) -> float | None:
    if name in record.before and name in record.after and record.after[name] >= record.before[name]:
        return record.after[name] - record.before[name]
    return None


def _drafts_per_step(session: Session, record: LevelRecord, deltas: dict[str, float | None]) -> float | None:
    """Drafts per decode step of a request over the level (module docstring); None without counters."""
    generated, drafts = deltas["generated_tokens"], deltas["drafts"]
    if generated is None or drafts is None:
        return None
    # the requests sent in the counters' window: all but the `warmup` sent before it
    requests = sum(1 for r in session.runs if r.arm == record.arm and r.level == record.level and r.index >= record.warmup)
    steps = generated - requests - (deltas["accepted_tokens"] or 0)
    return drafts / steps if steps > 0 else None


def _percentiles(values: list[float]) -> dict[str, float | None]:
    spread = distribution(once(values))
    return {"p50": spread.p50, "p90": spread.p90, "p99": spread.p99}


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def sweep_report(session: Session) -> dict[str, Any]:
    """The rows, the adjacent arms' crossovers, their one-line sentences (first, for people) and
    the drafting schedule they give (`sweep_schedule`)."""
    rows = sweep_rows(session)
    pairs = crossovers(session, rows)
    labels = {arm.id: arm.label for arm in session.arms}
    for pair in pairs:
        pair["sentence"] = sentence(pair, labels, [c["level"] for c in pair["levels"]])
    public = [{k: v for k, v in row.items() if k != "decode_tok_s"} for row in rows]
    return {"session": session.name, "kind": session.kind, "simulated": session.simulated,
            "summary": [pair["sentence"] for pair in pairs], "levels": public, "crossovers": pairs,
            "schedule": sweep_schedule(session, rows)}


def sweep_json(session: Session) -> str:
    """`tokenreel report SWEEP --format json`: the session, one row per arm and level, crossovers."""
    return orjson.dumps(sweep_report(session), option=orjson.OPT_INDENT_2).decode() + "\n"
