"""Shared fixtures: simulated endpoints on loopback (vLLM-shaped unless a profile names another
engine: `dataclasses.replace(profile, engine="sglang")`), reached through real sockets.

Under pytest-xdist (`make test` runs `-n 2 --dist loadfile`) a module's tests run on one worker,
one after another, so its module-scoped fixtures (a recorded ladder, a built wheel) are made once.
"""

from __future__ import annotations

import subprocess
import sys
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


# A Ray head of 2 CPUs in a process of its own, printing its address; stopped when stdin closes.
RAY_HEAD = ("import ray, sys; ctx = ray.init(num_cpus=2, include_dashboard=False);"
            " print(ctx.address_info['gcs_address'], flush=True); sys.stdin.read(); ray.shutdown()")


@pytest.fixture(scope="session")
def ray_head() -> Iterator[str]:
    """A local Ray head (2 CPUs, as CI has) for `--ray` commands to join by its address, as on a
    real cluster; one for the whole run (starting one on 2 cores takes seconds). Loopback only,
    so without Ray's token authentication (the commands inherit the setting)."""
    patch = pytest.MonkeyPatch()
    patch.setenv("RAY_AUTH_MODE", "disabled")
    head = subprocess.Popen([sys.executable, "-c", RAY_HEAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        address = head.stdout.readline().strip() if head.stdout else ""
        assert address, "the Ray head did not start"
        yield address
    finally:
        if head.stdin:
            head.stdin.close()
        try:
            head.wait(timeout=120)
        except subprocess.TimeoutExpired:
            head.kill()
        patch.undo()
