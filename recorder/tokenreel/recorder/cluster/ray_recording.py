"""`record --ray`: one recorder worker per replica, on the node that serves it.

Each replica's worker is a Ray actor placed next to its engines (`ray_placement`), so the
kernel's receive times are taken there, not across the network. It runs that replica's part of
the recording exactly as `record` does on one machine (`runner.record_replica`: its shard, its
arms one after another, the idle gate before every run) and streams what changed after every
run to the driver, which alone writes the session, atomically as always. A worker or node that
dies loses only the run in flight: every finished run is already saved on the driver, the other
replicas go on, and `--resume` records the rest. Killing the driver loses nothing saved either.

What crosses Ray is the archive's own content (no API key ever: each worker reads its arms'
`api_key_env` from its own node's environment). Imported only under `--ray`.
"""

from __future__ import annotations

import asyncio
import platform
import queue
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayActorError, RayError

import tokenreel.base.version
from tokenreel.recorder.client import event_loop
from tokenreel.recorder.cluster.ray_placement import placements
from tokenreel.recorder.events import EventFn
from tokenreel.recorder.runner import RecordResult, record_replica
from tokenreel.recorder.todo import done_keys, select_arms
from tokenreel.session.archive import save
from tokenreel.session.gpu import GpuCheck
from tokenreel.session.json_form import session_to_dict
from tokenreel.session.model import Run, Session, replica_count
from tokenreel.session.validate import from_dict

PLACE_TIMEOUT_S = 120.0  # a worker not started by then waits for a resource no node has free
TALLIES = ("ok", "failed", "skipped", "invalid", "short", "retried", "client_busy", "host_contended")


@dataclass
class Update:
    """What a worker's recording changed since its last update: the driver merges and saves it."""

    runs: list[Run]
    recorded: dict[str, list[dict[str, str]]]  # per arm: this worker's recording entries so far
    gpu: dict[str, list[GpuCheck]]  # per arm: this worker's GPU gate checks so far (one replica: its node's GPU)
    fingerprints: dict[str, dict[str, Any]]  # per arm, from the worker of replica 0 (or the only one)
    simulated: bool
    tally: dict[str, int]  # this worker's RecordResult counts so far
    stopped_on_failure: bool = False


@dataclass
class WorkerInfo:
    node: str  # the node's IP as Ray names it
    node_id: str
    hostname: str
    tokenreel: str
    python: str


@ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)
class ReplicaRecorder:
    """One replica's recorder on its node (module docstring)."""

    def info(self) -> WorkerInfo:
        ip = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]  # Ray leaves it unannotated
        return WorkerInfo(ip, ray.get_runtime_context().get_node_id(), socket.gethostname(),
                          tokenreel.base.version.__version__, platform.python_version())

    def record(self, data: dict[str, Any], arm_ids: list[str] | None, replica: int | None,
               fail_fast: bool) -> Iterator[tuple[str, Any]]:
        """Stream ("event", RecordEvent) and ("update", Update) as the recording goes, then
        ("done", None), or ("error", line). The recording runs on a thread of its own, so its
        event loop never waits for Ray to send a message."""
        messages: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        thread = threading.Thread(target=_record, args=(messages, data, arm_ids, replica, fail_fast),
                                  name=f"replica-{replica}", daemon=True)
        thread.start()
        while True:
            kind, payload = messages.get()
            yield kind, payload
            if kind in ("done", "error"):
                break
        thread.join()


def _record(messages: queue.SimpleQueue[tuple[str, Any]], data: dict[str, Any], arm_ids: list[str] | None,
            replica: int | None, fail_fast: bool) -> None:
    """On the worker: the replica's recording, its changes sent after every save point."""
    try:
        session = from_dict(data, "<the driver's session>")
        result = RecordResult(Path("<the driver's session>"))
        tracker = _Changes(session, result)
        emit: EventFn = lambda event: messages.put(("event", event))  # noqa: E731
        node = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]  # Ray leaves it unannotated
        arms = select_arms(session, arm_ids)
        persist = lambda: messages.put(("update", tracker.update(replica)))  # noqa: E731
        event_loop.run(record_replica(session, result, emit, fail_fast, None, arms, replica, persist, node))
        messages.put(("update", tracker.update(replica)))
        messages.put(("done", None))
    except BaseException as exc:  # one line for the driver, whatever broke
        messages.put(("error", f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"))


class _Changes:
    """What of the worker's session copy the driver has not been sent yet."""

    def __init__(self, session: Session, result: RecordResult) -> None:
        self.session, self.result = session, result
        self.sent = {id(run) for run in session.runs}  # the driver's own runs
        self.known = {arm.id: (len(arm.recorded), len(arm.gpu)) for arm in session.arms}  # what the driver already has

    def update(self, replica: int | None) -> Update:
        runs = [run for run in self.session.runs if id(run) not in self.sent]
        self.sent.update(id(run) for run in runs)
        arms = self.session.arms
        return Update(
            runs=runs,
            recorded={arm.id: arm.recorded[self.known[arm.id][0]:] for arm in arms},
            gpu={arm.id: arm.gpu[self.known[arm.id][1]:] for arm in arms},
            fingerprints={arm.id: arm.fingerprint for arm in arms} if replica in (None, 0) else {},
            simulated=self.session.simulated,
            tally={name: getattr(self.result, name) for name in TALLIES},
            stopped_on_failure=self.result.stopped_on_failure,
        )


@dataclass
class _Merge:
    """The driver's side: every worker's updates folded into the one session it saves."""

    session: Session
    path: Path
    base: dict[str, tuple[list[dict[str, str]], list[GpuCheck]]] = field(default_factory=dict)  # before this record
    updates: dict[int, Update] = field(default_factory=dict)  # each worker's latest

    def __post_init__(self) -> None:
        self.base = {arm.id: (list(arm.recorded), list(arm.gpu)) for arm in self.session.arms}

    def apply(self, worker: int, update: Update, result: RecordResult) -> None:
        session = self.session
        keys = {run.key for run in update.runs}
        session.runs = [run for run in session.runs if run.key not in keys] + update.runs
        self.updates[worker] = update
        latest = [self.updates[w] for w in sorted(self.updates)]
        for arm in session.arms:
            recorded, gpu = self.base[arm.id]
            arm.recorded[:] = recorded + [entry for u in latest for entry in u.recorded.get(arm.id, [])]
            arm.gpu[:] = gpu + [check for u in latest for check in u.gpu.get(arm.id, [])]
            arm.fingerprint = update.fingerprints.get(arm.id, arm.fingerprint)
        session.simulated = session.simulated or update.simulated
        for name in TALLIES:
            setattr(result, name, sum(u.tally[name] for u in latest))
        result.stopped_on_failure = result.stopped_on_failure or update.stopped_on_failure
        save(session, self.path)


async def record_on_ray(session: Session, path: Path, arm_ids: list[str] | None, on_event: EventFn,
                        fail_fast: bool, resources: list[str]) -> RecordResult:
    """`runner.record` with each replica's part on a Ray worker placed next to it (module
    docstring); Ray is connected. A worker that dies is one line in `result.lost` and the rest go
    on. ValueError (one line) when a replica cannot be placed or a worker runs another tokenreel."""
    arms = select_arms(session, arm_ids)
    result = RecordResult(Path(path))
    result.already_ok = sum(1 for key in done_keys(session) if key[0] in {arm.id for arm in arms})
    count = replica_count(arms)
    replicas: list[int | None] = list(range(count)) if count > 1 else [None]
    options = placements(arms, resources)
    # ray.remote's annotations give back the class itself, not the actor class that has .options
    workers = [ReplicaRecorder.options(**where).remote() for where in options]  # type: ignore[attr-defined]
    try:
        infos = await _check_workers(workers)  # before the first save: a refusal writes nothing
        save(session, path)
        merge = _Merge(session, Path(path))
        data = ray.put(session_to_dict(session))
        await asyncio.gather(*(_follow(actor, info, worker, replica, data, arm_ids, fail_fast, merge, on_event, result)
                               for worker, (actor, info, replica) in enumerate(zip(workers, infos, replicas, strict=False))))
    except (asyncio.CancelledError, KeyboardInterrupt):
        result.interrupted = True
    finally:
        for actor in workers:
            ray.kill(actor)
    return result


async def _check_workers(workers: list[Any]) -> list[WorkerInfo]:
    """Every worker started (placed) in time and runs this tokenreel and Python; ValueError else."""
    mine = (tokenreel.base.version.__version__, platform.python_version())
    infos = []
    for replica, actor in enumerate(workers):
        try:
            info: WorkerInfo = await asyncio.wait_for(_awaited(actor.info.remote()), PLACE_TIMEOUT_S)
        except TimeoutError:
            raise ValueError(f"--ray: replica {replica}'s recorder worker was not started within {PLACE_TIMEOUT_S:.0f} s:"
                             " its node's resource is taken or gone (`ray status` shows them)") from None
        except RayError as exc:
            raise ValueError(f"--ray: replica {replica}'s recorder worker failed to start: {' '.join(str(exc).split())[:200]}") from None
        if (info.tokenreel, info.python) != mine:
            raise ValueError(f"--ray: node {info.node} ({info.hostname}) runs tokenreel {info.tokenreel} on Python {info.python},"
                             f" this machine tokenreel {mine[0]} on Python {mine[1]}: install the same tokenreel[ray] on every node")
        infos.append(info)
    return infos


async def _awaited(ref: Any) -> Any:
    return await ref


async def _follow(actor: Any, info: WorkerInfo, worker: int, replica: int | None, data: Any, arm_ids: list[str] | None,
                  fail_fast: bool, merge: _Merge, on_event: EventFn, result: RecordResult) -> None:
    """One worker's stream, merged and shown as it comes; its death is one line in result.lost."""
    name = f"{'the recorder' if replica is None else f'replica {replica}'} on node {info.node}"
    try:
        async for ref in actor.record.remote(data, arm_ids, replica, fail_fast):
            kind, payload = await ref
            if kind == "event":
                on_event(payload)
            elif kind == "update":
                merge.apply(worker, payload, result)
            elif kind == "error":
                result.lost.append(f"{name}'s Ray worker stopped: {payload}; every run it finished is saved")
    except RayActorError:  # the worker's process, or its node, is gone
        nodes = ray.nodes()  # type: ignore[no-untyped-call]  # Ray leaves it unannotated
        alive = any(node["NodeID"] == info.node_id and node.get("Alive") for node in nodes)
        why = "its process died" if alive else "its node left the cluster"
        result.lost.append(f"{name}'s Ray worker was lost ({why}): every run it finished is saved; the run in flight is not")
    except RayError as exc:  # an object lost with its node, a task that could not run
        result.lost.append(f"{name}'s Ray worker failed ({type(exc).__name__}): every run it finished is saved")

