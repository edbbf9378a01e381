"""Each replica's own ladder: a session recorded on several replicas, figure by figure.

The pooled ladder forms every ratio within a replica (a prompt's cells share it) and treats
replicas as strata (`ladder.paired`); this view shows each replica alone, so one whose GPU ran
slower, failed or was contended is seen as such, never averaged away: its endpoints, prompts,
runs by status, contended runs, and its ladder over its own shard.
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
            "ladder": [asdict(row) for row in build_ladder(session, mine, baseline)],
        })
    return entries
