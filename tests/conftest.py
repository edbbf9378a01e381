"""Shared fixtures: simulated endpoints on loopback (vLLM-shaped unless a profile names another
engine: `dataclasses.replace(profile, engine="sglang")`), reached through real sockets.

Under pytest-xdist (`make test` runs `-n 3`) a module's tests run on one worker, one after
another, so its module-scoped fixtures (a recorded ladder, a built wheel) are made once; the
modules of each of the SERIAL units run one after another on one worker while the other workers
take the other modules.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

from tests.browser import Chromium, chromium_executable
from tokenreel.simulator.profiles import SEED_LADDER, Profile
from tokenreel.simulator.server import SimCluster, running

FAST = 0.02  # time scale: 50x faster than the profiles' real timing

# Modules that must not run beside each other, in units, each run in the order given on one
# worker, the units handed out first, to different workers. The real-engine tests (each starts
# llama-servers), then the tests whose assertions are measured speeds (a sweep's crossover, 4 slots
# above 1, replicas at once), then the Ray tests (one Ray head each; they count the recorder
# workers on the machine, and hold a simulated ladder recorded by Ray workers to the profiles'
# rates). Apart from those, the real-vLLM tests (five `vllm serve` starts, each minutes of imports,
# the engine then taking both cores while it decodes). The Ray tests come last in the first unit,
# not in a unit of their own nor after vLLM: started beside the vLLM server's start-up and the
# llama.cpp ladders, a local Ray of two workers starved the simulators it recorded and the vLLM
# server's own output, and its replicas recorded beside the measured speeds' replicas (beside two
# CPU hogs) starved both simulators, so that most prompts were not sent at the profiles' rates.
SERIAL = {
    "engines, then measured speeds, then ray": (
        "test_engine_build.py", "test_engine_llamacpp.py", "test_launch.py", "test_busy_host.py",
        "test_sweep_charts.py", "test_sweep_report.py", "test_replicas.py", "test_engine_sweep.py",
        "test_ray.py", "test_record_ray.py",
    ),
    "vllm": ("test_engine_vllm.py",),
}
UNIT = {name: unit for unit, names in SERIAL.items() for name in names}
RANK = {name: index for index, name in enumerate(UNIT)}


class Serial(LoadScopeScheduling):
    """xdist's module-at-a-time scheduling (`--dist loadfile`), but with each SERIAL unit's modules
    as one unit of work, a worker's first. A scheduler rather than `xdist_group` markers: the
    locked pytest ignores the node ids that `--dist loadgroup` rewrites, so those group nothing."""

    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        return UNIT.get(module.rsplit("/", 1)[-1], module)

    def _assign_work_unit(self, node: WorkerController) -> None:
        first = next((unit for unit in SERIAL if unit in self.workqueue), None)
        if first is not None and not self.assigned_work[node]:
            self.workqueue.move_to_end(first, last=False)
        super()._assign_work_unit(node)


@pytest.hookimpl(optionalhook=True)  # a run without xdist (-p no:xdist) has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> Serial:
    """Every `-n` run schedules with Serial, whatever `--dist` says."""
    return Serial(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The SERIAL modules in SERIAL's order (a stable sort: the rest keep theirs)."""
    items.sort(key=lambda item: RANK.get(item.path.name, -1))


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    """One headless Chromium per module (tests/browser.py), for the HTML pages' tests."""
    if chromium_executable() is None:
        pytest.skip("no Chromium (/usr/bin/chromium or chromium on PATH): install Debian's chromium package; make test does")
    chromium = Chromium(tmp_path_factory.mktemp("chromium"))
    yield chromium
    chromium.close()


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
