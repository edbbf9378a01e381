"""Shared fixtures: simulated endpoints on loopback (vLLM-shaped unless a profile names another
engine: `dataclasses.replace(profile, engine="sglang")`), reached through real sockets."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import pytest

from tokenreel.simulator.profiles import SEED_LADDER, Profile
from tokenreel.simulator.server import SimCluster, running

FAST = 0.02  # time scale: 50x faster than the profiles' real timing


@pytest.fixture(scope="module")
def sim() -> Iterator[SimCluster]:
    """The seed ladder (bf16, nvfp4, nvfp4-dflash2), shared by the tests of one module.

    Shared state: measure counters as differences, and arm faults on your own cluster
    (make_sim) rather than here.
    """
    with running(SEED_LADDER, time_scale=FAST) as cluster:
        yield cluster


@pytest.fixture
def make_sim() -> Iterator[Callable[..., SimCluster]]:
    """Factory: make_sim(profiles, time_scale=FAST) -> a started cluster, closed after the test."""
    clusters: list[SimCluster] = []

    def make(profiles: Sequence[Profile], time_scale: float = FAST) -> SimCluster:
        cluster = SimCluster(profiles, time_scale).start()
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.close()
