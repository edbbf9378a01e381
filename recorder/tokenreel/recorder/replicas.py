"""Replicas: one arm served by several endpoints, one per GPU or node.

`record` shards the prompts across the replicas, and each replica runs the whole ladder on its
shard: its arms strictly one after another (on that replica's endpoints, so no two arms ever
share a GPU), replica r starting at arm r (the order rotated, so a drift over the hours, a GPU
warming up, cancels across replicas instead of favouring the arm recorded first). Replicas run
at the same time, on different GPUs.

The shard is stratified and fixed: within each category (in the suite's order) the prompts, in
a seeded shuffle, are dealt to the replicas in turn, the deal continuing from one category to
the next, so every replica holds each category's share within one prompt and the shards differ
in size by at most one. The same suite and replica count give the same shards, so `--resume`
finds every prompt's runs on the replica that recorded them.
"""

from __future__ import annotations

from dataclasses import replace

from tokenreel.analysis.intervals import stratified_order
from tokenreel.session.model import Arm, Prompt

SHARD_SEED = 28  # fixed: a resumed recording must shard exactly as the first one did


def shards(prompts: list[Prompt], replicas: int) -> list[list[str]]:
    """The prompt ids each replica records, in the suite's order (module docstring)."""
    order = stratified_order([(p.id, p.category) for p in prompts], SHARD_SEED)
    category = {p.id: p.category for p in prompts}
    dealt: dict[str, int] = {}
    turn = 0
    for name in dict.fromkeys(p.category for p in prompts):
        for prompt_id in (i for i in order if category[i] == name):
            dealt[prompt_id] = turn % replicas
            turn += 1
    return [[p.id for p in prompts if dealt[p.id] == r] for r in range(replicas)]


def replica_arm(arm: Arm, replica: int) -> Arm:
    """The arm as replica `replica` serves it: its base_url and metrics_url."""
    return arm_view(arm, base_url=arm.base_urls[replica], metrics_url=arm.metrics_urls[replica])


def arm_view(arm: Arm, base_url: str, metrics_url: str | None) -> Arm:
    """The arm on another endpoint (a replica's, a launched engine's port). It shares the arm's
    `recorded` list; what the recorder must send but never archives goes along (config)."""
    view = replace(arm, base_url=base_url, metrics_url=metrics_url)
    view.__dict__.update({k: v for k, v in arm.__dict__.items() if k.startswith("_")})
    return view


def rotated(arms: list[Arm], replica: int) -> list[Arm]:
    """Replica r records the arms from the r-th on, wrapping round (module docstring)."""
    start = replica % len(arms) if arms else 0
    return arms[start:] + arms[:start]


def replica_name(arm_id: str, replica: int) -> str:
    """How progress lines and problems name an arm's replica."""
    return f"{arm_id} replica {replica}"
