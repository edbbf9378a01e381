"""`tokenreel import vllm-bench|aiperf`: a peer tool's result file as a session arm."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tokenreel.base.safe_text import shown_path
from tokenreel.cli.app import app, check_writable, fail, load_session, out, user_errors
from tokenreel.cli.terminal import Command, Group

if TYPE_CHECKING:
    from tokenreel.recorder.imports.build import PeerRun

import_app = typer.Typer(
    cls=Group,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="""Peers' results as sessions: a vllm bench serve or AIPerf run as an arm that report,
compare and render read. What the file lacks is said plainly (in the arm's fingerprint and
`imported.lacks`), never made up.

Examples:

\b
  tokenreel import vllm-bench result.json --arm bf16 --out peers.json
  tokenreel import aiperf profile_export.jsonl --arm aiperf --into peers.json""",
)
app.add_typer(import_app, name="import", short_help="Turn a vllm bench serve or AIPerf result into a session arm.")

ArmOption = Annotated[str | None, typer.Option("--arm", metavar="ID", help="The arm's id (default: the tool's name).")]
LabelOption = Annotated[str | None, typer.Option("--label", help="The name shown (default: the arm's id).")]
OutOption = Annotated[
    Path | None, typer.Option("--out", "-o", metavar="SESSION", help="Write a new session (default: FILE's name + .session.json).")
]
IntoOption = Annotated[Path | None, typer.Option("--into", metavar="SESSION", help="Add the arm to this session instead.")]
VersionOption = Annotated[str, typer.Option("--tool-version", metavar="X", help="The peer tool's version, when its file does not say.")]
ForceOption = Annotated[bool, typer.Option(help="Overwrite --out if it exists.")]


@import_app.command("vllm-bench", cls=Command, short_help="A `vllm bench serve --save-result --save-detailed` result file.")
def vllm_bench(
    source: Annotated[Path, typer.Argument(metavar="FILE", help="The result JSON vllm bench serve wrote.")],
    arm: ArmOption = None, label: LabelOption = None, out_path: OutOption = None, into: IntoOption = None,
    tool_version: VersionOption = "", force: ForceOption = False,
) -> None:
    """Per request: chunk arrivals rebuilt exactly from ttfts and itls (gaps between chunks,
    relative to the request's start), output tokens, the whole reply text. Needs --save-detailed."""
    from tokenreel.recorder.imports import vllm_bench as peer

    _import(source, lambda payload: peer.parse(payload, str(source), tool_version), arm or "vllm-bench", label, out_path, into, force)


@import_app.command("aiperf", cls=Command, short_help="AIPerf's per-request profile_export.jsonl.")
def aiperf(
    source: Annotated[Path, typer.Argument(metavar="FILE", help="The profile_export.jsonl AIPerf wrote.")],
    arm: ArmOption = None, label: LabelOption = None, out_path: OutOption = None, into: IntoOption = None,
    tool_version: VersionOption = "", force: ForceOption = False,
    model: Annotated[str, typer.Option(help="The model measured (AIPerf's records do not name it).")] = "",
) -> None:
    """Per request: TTFT, request latency, output tokens; chunk arrivals where the record has
    inter_chunk_latency, else only the first token and the last response (said in the arm)."""
    from tokenreel.recorder.imports import aiperf as peer

    _import(source, lambda payload: peer.parse(payload, str(source), tool_version, model), arm or "aiperf", label, out_path, into, force)


def _import(source: Path, parse: Callable[[bytes], PeerRun], arm_id: str, label: str | None, out_path: Path | None,
            into: Path | None, force: bool) -> None:
    from tokenreel.base import files
    from tokenreel.recorder.imports.build import add_arm, new_session
    from tokenreel.session import archive

    if out_path is not None and into is not None:
        fail("--out and --into: give one (a new session, or one to add the arm to)")
    target = into or out_path or Path(f"{source.name}.session.json")
    if into is None:
        check_writable(target, force)
    session = load_session(into) if into is not None else new_session(f"Imported: {source.name}")
    with user_errors():
        try:
            payload = files.read_input(source, "peer result")
        except OSError as exc:
            fail(f"{shown_path(source)}: {exc}")
        peer = parse(payload)
        session = add_arm(session, peer, arm_id, label or arm_id, str(source))
    with user_errors(target):
        archive.save(session, target)
    imported = session.arm(arm_id).imported
    runs = [run for run in session.runs if run.arm == arm_id]
    failed = sum(run.status != "ok" for run in runs)
    out.print(f"{shown_path(target)}: arm {arm_id!r}, {len(runs)} requests ({failed} failed) from {peer.tool}", markup=False)
    for why in imported.lacks.values() if imported else ():
        out.print(f"  lacks: {why}", markup=False)
