"""Each replica's own ladder: a session recorded on several replicas, figure by figure.

The pooled ladder forms every ratio within a replica (a prompt's cells share it) and treats
replicas as strata (`ladder.paired`); this view shows each replica alone, so one whose GPU ran
slower, failed or was contended is seen as such, never averaged away: its endpoints, prompts,
runs by status, contended runs, and its ladder over its own shard. And the one thing replicas
must share that only their streams tell: the model each names in its responses.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

from tokenreel.analysis.ladder import Cell, build_ladder, common_prompts
from tokenreel.session.model import Session, replica_count


def replica_ladders(session: Session, cells: list[Cell], baseline: str | None = None) -> list[dict[str, Any]]:
    """One entry per replica; empty for a session on one replica."""
    count = replica_count(session.arms)
    if count == 1:
        return []
    entries = []
    for replica in range(count):
        mine = [c for c in cells if c.replica == replica]
        measured = [r for r in session.runs if r.replica == replica and not r.warmup]
        entries.append({
            "replica": replica,
            "endpoints": {arm.id: arm.base_urls[replica] for arm in session.arms if arm.base_urls},
            "nodes": sorted({r.node for r in measured if r.node}),  # record --ray: the nodes that recorded it
            "prompts": len(common_prompts(session, mine)),
            "runs": dict(sorted(Counter(r.status for r in measured).items())),
            "contended": sum(1 for r in measured if r.contended),
            "served_models": sorted({r.served_model for r in measured if r.served_model is not None}),
            "ladder": [asdict(row) for row in build_ladder(session, mine, baseline)],
        })
    return entries


def served_model_lines(session: Session) -> list[str]:
    """One line per arm whose replicas' streams named different models (each run's `model`, as
    the server put it in its response): their runs are pooled in the arm's cells, so the arm
    mixes two servings; empty when every arm's runs agree or none named one."""
    lines = []
    for arm in session.arms:
        named: dict[str, set[int]] = {}
        for run in session.runs:
            if run.arm == arm.id and run.served_model is not None:
                named.setdefault(run.served_model, set()).add(run.replica or 0)
        if len(named) > 1:
            by_replica = sorted(named.items(), key=lambda item: (min(item[1]), item[0]))
            said = "; ".join(f"{model!r} by replica {', '.join(map(str, sorted(replicas)))}" for model, replicas in by_replica)
            lines.append(f"{arm.id}: its replicas' responses name {len(named)} models ({said}), pooled in its cells as one"
                         " serving; start every replica with the same model and re-record the arm")
    return lines
