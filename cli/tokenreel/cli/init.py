"""`tokenreel init`: write a commented starter ladder for one engine, to edit and record."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tokenreel.base.files import write_atomic
from tokenreel.base.safe_text import shown_path
from tokenreel.cli.app import app, check_writable, out, user_errors
from tokenreel.cli.terminal import Command
from tokenreel.recorder.starter import StarterEngine


@app.command(cls=Command, short_help="Write a commented starter ladder (config) for vLLM, SGLang or llama.cpp.")
def init(
    engine: Annotated[StarterEngine, typer.Option(help="The engine your servers run; sets the ports and the start commands.")]
    = StarterEngine.VLLM,
    arms: Annotated[
        int, typer.Option(min=1, max=3, help="1: the original model; 2: + a quantized one; 3: + the quantized one with a drafter.")
    ] = 3,
    out_path: Annotated[Path, typer.Option("--out", "-o", metavar="FILE", help="The config to write.")] = Path("ladder.toml"),
    force: Annotated[bool, typer.Option(help="Overwrite --out if it exists.")] = False,
) -> None:
    """Write a starter ladder config: the original model, a quantized one and the quantized one
    with a drafter (its `drafts_for` names the quantized arm), on the engine's default ports.

    Every key has a comment saying what it is for, and every arm the command that starts its
    server so that tokenreel gets every figure the engine can give. Change the models to
    yours, start the servers, then check and record.

    Examples:

    \b
      tokenreel init --engine vllm
      tokenreel init --engine llamacpp --arms 2 --out q4.toml
      tokenreel record --config ladder.toml --check
    """
    from tokenreel.recorder.starter import starter_ladder

    check_writable(out_path, force)
    text = starter_ladder(engine, arms, out_path.stem or "ladder", out_path.name)
    with user_errors(out_path):
        write_atomic(out_path, text.encode("utf-8"))
    out.print(f"wrote {shown_path(out_path)}: {arms} arm(s) for {engine.value}; edit the models, start the servers as its"
              f" comments say, then: tokenreel record --config {shown_path(out_path)} --check", markup=False, soft_wrap=True)
