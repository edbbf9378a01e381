"""`--ray ADDRESS|local`: join a Ray cluster for one command, or start a local one and stop it after.

Ray is an optional extra (`pip install 'tokenreel[ray]'`) imported only here and in the modules
that run on it, so `tokenreel --help` and every command without --ray never load it. Each way
connecting can fail is one line and exit 2, before anything is written.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from tokenreel.cli.app import fail

# `--ray local`: a Ray started for this command. (typer has no option whose value may be left out,
# so the local cluster has a name of its own rather than a bare `--ray`.)
LOCAL = "local"
# Ray starts its workers at niceness 15, below everything else on the node: on a node whose engine
# keeps the CPUs busy, a recorder worker then stamps token arrivals late and a render worker
# crawls. Workers run at this command's own niceness instead, as its local workers would (never
# below 0: raising a priority takes a privilege the node's raylet may not have).
NICENESS_ENV = "RAY_worker_niceness"
RAY_HELP = ("Run on a Ray cluster (pip install 'tokenreel[ray]'): ADDRESS as `ray start --head` printed it (HOST:PORT,"
            " or auto); `local`: a local Ray started for this command and stopped after it.")


@contextmanager
def ray_cluster(address: str) -> Iterator[None]:
    """Ray connected (or started) for the block, disconnected (or stopped) after it."""
    require_ray()
    import ray

    if address not in (LOCAL, "auto"):
        _reachable(address)
    where = "a local Ray" if address == LOCAL else f"the Ray cluster at {address}"
    try:
        ray.init(address=None if address == LOCAL else address, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.WARNING, configure_logging=True,
                 runtime_env={"env_vars": {NICENESS_ENV: str(max(0, os.nice(0)))}})
    except ConnectionError as exc:
        fail(f"--ray {address}: no Ray cluster answers there ({' '.join(str(exc).split())[:200]}); start one with"
             " `ray start --head` and give the address it prints")
    except RuntimeError as exc:
        text = " ".join(str(exc).split())
        if "ersion mismatch" in text:
            fail(f"--ray {address}: this machine's Python or Ray differs from the cluster's: install the same"
                 " tokenreel[ray] (constraints.txt) on every node")
        fail(f"--ray: could not start or join {where}: {text[:300]}")
    try:
        yield
    finally:
        ray.shutdown()


def require_ray() -> None:
    """Ray is installed (the optional extra), or one line and exit 2: said before any work."""
    try:
        import ray  # noqa: F401
    except ImportError:
        fail("--ray needs Ray, an optional extra: pip install 'tokenreel[ray]'")


def _reachable(address: str) -> None:
    """Ray itself retries an unreachable head for minutes, printing as it goes: one look first."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        fail(f"--ray {address}: expected the head's HOST:PORT as `ray start --head` prints it (or auto)")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        fail(f"--ray {address}: no Ray cluster answers there ({exc.strerror or exc}); start one with"
             " `ray start --head` and give the address it prints")
