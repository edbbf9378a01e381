"""Where `record --ray` starts each replica's recorder worker: on the node that serves it.

Timestamps belong next to the engine, so a worker goes either where the config's
`[session] ray_resources` names (a Ray custom resource per replica, declared by its node with
`ray start --resources='{"NAME": 1}'`), or, without it, by node affinity to the node whose IP
the replica's endpoints resolve to (a loopback endpoint: the driver's own node). A replica whose
arms sit on different nodes, or on a host that is no Ray node, is one line naming it and the
fix, before anything is recorded. Imported only under `--ray`.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from tokenreel.session.model import Arm, replica_count

RESOURCES_HINT = "or name a Ray resource per replica in [session] ray_resources"


def placements(arms: list[Arm], resources: list[str]) -> list[dict[str, Any]]:
    """Ray actor options for each replica's worker (one entry for arms of one endpoint)."""
    count = replica_count(arms)
    if resources:
        available = ray.cluster_resources()  # type: ignore[no-untyped-call]  # Ray leaves it unannotated
        for replica, name in enumerate(resources):
            if available.get(name, 0) < 1:
                raise ValueError(f"[session] ray_resources: no node of the Ray cluster has {name!r} (replica {replica});"
                                 f" start that node with `ray start --resources='{{\"{name}\": 1}}'`")
        return [{"resources": {name: 1}} for name in resources]
    alive = [node for node in ray.nodes() if node.get("Alive")]  # type: ignore[no-untyped-call]  # Ray leaves it unannotated
    nodes = {node["NodeManagerAddress"]: node["NodeID"] for node in alive}
    here = ray.get_runtime_context().get_node_id()
    options = []
    for replica in range(count):
        urls = [arm.base_urls[replica] if arm.base_urls else arm.base_url for arm in arms]
        found = {_node_of(url, nodes, here, replica) for url in urls}
        if len(found) > 1:
            raise ValueError(f"--ray: replica {replica}'s arms are served from different nodes ({', '.join(urls)}): one"
                             f" recorder worker cannot be next to all of them; {RESOURCES_HINT}")
        options.append({"scheduling_strategy": NodeAffinitySchedulingStrategy(found.pop(), soft=False)})
    return options


def _node_of(url: str, nodes: dict[str, str], here: str, replica: int) -> str:
    """The Ray node id serving `url`: by its host's addresses; loopback is the driver's node."""
    host = urlsplit(url).hostname or ""
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except OSError as exc:
        raise ValueError(f"--ray: replica {replica}'s endpoint {url}: its host does not resolve ({exc.strerror or exc})") from None
    if any(ipaddress.ip_address(address.split("%")[0]).is_loopback for address in addresses):
        return here
    for address in sorted(addresses):
        if address in nodes:
            return nodes[address]
    raise ValueError(f"--ray: replica {replica}'s endpoint {url} is on {host} ({', '.join(sorted(addresses))}), which is no"
                     f" node of the Ray cluster (nodes: {', '.join(sorted(nodes)) or 'none'}): join that host to the"
                     f" cluster, {RESOURCES_HINT}")
