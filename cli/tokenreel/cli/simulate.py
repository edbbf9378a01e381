"""`tokenreel simulate`: vLLM-like (or SGLang, llama.cpp) endpoints on loopback, no GPU."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tokenreel.cli.app import app, err, fail, os_error_line, out, split_ids, user_errors
from tokenreel.cli.terminal import Command

if TYPE_CHECKING:
    from tokenreel.simulator.profiles import FaultMode


@app.command(cls=Command, short_help="Serve vLLM-like endpoints that imitate the seed ladder (no GPU).")
def simulate(
    profiles: Annotated[
        str,
        typer.Option(metavar="IDS", help="Profiles to serve, comma-separated, one port each (bf16, nvfp4, nvfp4-dflash2)."),
    ] = "bf16,nvfp4,nvfp4-dflash2",
    port: Annotated[
        int, typer.Option(min=1, max=65535, metavar="PORT", help="Port of the first profile; the next get +1, +2...")
    ] = 8100,
    host: Annotated[
        str, typer.Option(metavar="ADDRESS", help="IP address to listen on; one that is not loopback (0.0.0.0) is served with a warning.")
    ] = "127.0.0.1",
    time_scale: Annotated[
        float, typer.Option(min=0.0001, metavar="FACTOR", help="Multiply every delay (0.1 = ten times faster).")
    ] = 1.0,
    fault: Annotated[
        list[str] | None,
        typer.Option(
            metavar="PROFILE=MODE",
            help="Make a profile fail, e.g. nvfp4=429; repeatable (modes: refuse 401 404 429 500 error_event drop "
            "stall malformed no_done early_stop busy).",
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(metavar="NAME", help="Wire shape of every endpoint: vllm (0.33), sglang (0.5) or llamacpp (llama.cpp server)."),
    ] = "vllm",
    answers: Annotated[
        list[str] | None,
        typer.Option(
            metavar="PROFILE=FILE",
            help="Serve a profile planned answers: a JSONL of {\"prompt\": ..., \"answer\": ...}; repeatable.",
        ),
    ] = None,
) -> None:
    """Serve OpenAI endpoints that imitate the seed ladder, without a GPU (vLLM-like unless --engine).

    Each profile gets its own port (/v1/chat/completions, /v1/completions, /v1/models,
    /metrics), streaming at the profile's speed. Point a config's base_url at them. The test
    controls (/sim/state) need the X-Sim-Token header with the token printed at start.

    Examples:

    \b
      tokenreel simulate
      tokenreel simulate --profiles bf16,nvfp4 --port 9000 --time-scale 0.1
      tokenreel simulate --fault nvfp4=429 --fault bf16=stall
      tokenreel simulate --engine llamacpp
      tokenreel simulate --answers nvfp4=broken.jsonl
    """
    from tokenreel.simulator.control import SIM_TOKEN, TOKEN_HEADER
    from tokenreel.simulator.planned_answers import load_answers
    from tokenreel.simulator.profiles import ENGINES, Profile, engine_name, profile_by_id
    from tokenreel.simulator.server import exposure, ports_for, serve_forever

    chosen: list[Profile] = []
    with user_errors():
        wire = engine_name(engine)
        if wire is None:
            raise ValueError(f"--engine {engine!r}: expected one of {', '.join(ENGINES)}")
        faults = dict(_split_fault(item) for item in fault or [])
        planned = {profile_id: load_answers(Path(name)) for profile_id, name in (_split_answers(item) for item in answers or [])}
        for profile_id in split_ids(profiles) or []:
            try:
                profile = profile_by_id(profile_id)
            except KeyError as exc:
                raise ValueError(f"--profiles: {exc.args[0]}") from None
            chosen.append(dataclasses.replace(profile, engine=wire, fault=faults.get(profile_id, profile.fault),
                                              answers=planned.get(profile_id, profile.answers)))
        if unknown := sorted(set(planned) - {p.id for p in chosen}):
            raise ValueError(f"--answers: {', '.join(unknown)} is not among --profiles; name a profile served")
        warning = exposure(host)  # an explicit address only; a non-loopback one is said loudly
        ports = ports_for(chosen, port)
    if warning:
        err.print(f"WARNING: {warning}", markup=False, soft_wrap=True)
    shown = f"[{host}]" if ":" in host else host
    for profile, profile_port in zip(chosen, ports, strict=False):
        out.print(f"{profile.id:<16} http://{shown}:{profile_port}/v1   model {profile.model}   {profile.label}")
    out.print(f"Test controls (/sim/state, /sim/requests) need the header {TOKEN_HEADER}: {SIM_TOKEN}", soft_wrap=True)
    out.print("Ctrl-C stops. Point a config's base_url at these to record them.")
    try:
        asyncio.run(serve_forever(chosen, host, port, time_scale))
    except (ValueError, OSError) as exc:
        fail(os_error_line(exc) if isinstance(exc, OSError) else str(exc))
    except KeyboardInterrupt:
        pass


def _split_fault(item: str) -> tuple[str, FaultMode]:
    """One --fault PROFILE=MODE as (profile id, mode); ValueError lists the modes."""
    from tokenreel.simulator.profiles import FAULTS, fault_mode

    profile_id, _, asked = item.partition("=")
    mode = fault_mode(asked)
    if mode is None:
        raise ValueError(f"--fault {item!r}: expected PROFILE=MODE with MODE one of {', '.join(FAULTS)}")
    return profile_id, mode


def _split_answers(item: str) -> tuple[str, str]:
    """One --answers PROFILE=FILE as (profile id, file name)."""
    profile_id, _, name = item.partition("=")
    if not profile_id or not name:
        raise ValueError(f"--answers {item!r}: expected PROFILE=FILE, e.g. nvfp4=answers.jsonl")
    return profile_id, name
