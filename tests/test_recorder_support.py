"""Helpers shared by the recorder tests (pytest collects this module; it holds no tests)."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import aiohttp
import httpx
from aiohttp import web

from tokenreel.recorder.client.sse_client import stream_run
from tokenreel.session.model import Arm, Prompt, Run, Settings
from tokenreel.simulator.profiles import Profile, profile_by_id
from tokenreel.simulator.server import SimCluster

# Long enough that a loaded CI machine does not look like a stall (a Ray worker's stream on a CI box
# also building an engine went 3 s without a chunk); the tests of a stall set their own, shorter.
FAST_TIMEOUTS = {"connect": 10.0, "first_token": 30.0, "between_chunks": 20.0, "total": 120.0}


def arm_for(cluster: SimCluster, profile_id: str, **changes: Any) -> Arm:
    """An arm pointed at one simulated endpoint, serving that profile's model."""
    profile = next(p for p in cluster.profiles if p.id == profile_id)
    arm = Arm(
        id=profile.id,
        label=profile.label,
        base_url=cluster.base_url(profile.id),
        model=profile.model,
        metrics_url=cluster.metrics_url(profile.id),
    )
    return replace(arm, **changes)


def fast_settings(**changes: Any) -> Settings:
    base = Settings(
        prompts="builtin:ladder4", max_tokens=96, warmup=0, repeats=1, idle_wait_s=1.0, timeouts=dict(FAST_TIMEOUTS),
        host_wait_s=0.0,  # these runs are not about the host: no reading before each (longer than the run)
    )
    return replace(base, **changes)


def chat_prompt(text: str = "Implement a Python function that parses dates.", category: str = "code") -> Prompt:
    return Prompt(id=f"{category}-t", category=category, messages=[{"role": "user", "content": text}], prompt="")


def set_state(cluster: SimCluster, profile_id: str, **state: Any) -> dict[str, Any]:
    """POST the simulator's test control (busy gauges, contention, armed faults)."""
    response = httpx.post(f"{cluster.root_url(profile_id)}/sim/state", json=state, headers=cluster.control_headers, timeout=5)
    response.raise_for_status()
    return response.json()


def sent_bodies(cluster: SimCluster, profile_id: str) -> list[dict[str, Any]]:
    """The request bodies the simulated endpoint received, oldest first."""
    return httpx.get(
        f"{cluster.root_url(profile_id)}/sim/requests", headers=cluster.control_headers, timeout=5
    ).json()["requests"]


def seed(profile_id: str, **changes: Any) -> Profile:
    """A seed-ladder profile, optionally renamed or given a fault."""
    return replace(profile_by_id(profile_id), **changes)


async def stream_one(arm: Arm, prompt: Prompt, settings: Settings) -> Run:
    """One streamed run through a fresh session, as the runner does it."""
    run = Run(arm=arm.id, prompt=prompt.id, index=0, warmup=False)
    async with aiohttp.ClientSession() as http:
        await stream_run(http, arm, prompt, settings, run)
    return run


@asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[str]:
    """Serve a small aiohttp app on a loopback port in the current loop; yields its root URL."""
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[str, str]:
    """(stdout, stderr) of a CLI process; killed if still running after `timeout`."""
    try:
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
