"""The end card's small print: what the arms raced ran on and when, from the session's archive;
a fact none of them gave is said to be missing; a graded session adds its accuracy.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenreel.analysis.accuracy import end_line
from tokenreel.analysis.engine_figures import stated_version
from tokenreel.analysis.selection import DEFAULT_SELECTION, RunSelection
from tokenreel.analysis.serving_config import serving_identity
from tokenreel.session.gpu import gpu_hardware
from tokenreel.session.model import Arm, Session, fingerprint_summary

# What tells two arms of one engine apart on the small print ("vllm 0.32.0 (bfloat16, ngram, k 4, config 5eed1ad0)").
DISTINGUISHING = ("dtype", "quantization", "speculative", "config_hash")


@dataclass(frozen=True)
class EndFacts:
    """The end card's small print: what the arms ran on and when (missing facts are said missing)."""

    model: str
    hardware: str
    engine: str
    recorded: str
    engines: str = ""  # the engines alone, each once ("llamacpp b11312"): the race's header and title card
    accuracy: str = ""  # a graded session's pass@1, first arm raced → last ("" ungraded: no line)

    @property
    def header(self) -> tuple[str, ...]:
        """What the race ran on, for a header line, longest wording first."""
        return tuple(dict.fromkeys((f"{self.hardware} · {self.engine}", f"{self.hardware} · {self.engines}", self.hardware)))


def _engine(arm: Arm) -> tuple[str, str]:
    """("vllm 0.11.2", "bfloat16, ngram, k 4"): the engine and version the endpoint's fingerprint
    said (without a version, the config's declared engine, it says more, else the engine's bare
    name), and what tells this arm's serving apart (dtype, quantization, drafter, config hash)."""
    summary = serving_identity(arm)
    name, version = summary.get("engine", ""), summary.get("version", "")
    said = ", ".join(summary[k] if k != "config_hash" else f"config {summary[k]}" for k in DISTINGUISHING if k in summary)
    if version and not stated_version(version).startswith("unknown"):  # a llama.cpp "b0-unknown" says nothing
        engine = f"{name} {version}".strip()
    else:
        engine = arm.settings.get("engine") or name
    return engine, said


def _engines(arms: list[Arm]) -> str:
    """One engine for every arm: named once, the arms' differences after it ("llamacpp b11312
    (gguf ftype F16 / gguf ftype Q4_0)"), so the part that tells them apart survives a cut line;
    else each arm's engine with its own."""
    pairs = [_engine(a) for a in arms]
    engines = {engine for engine, _ in pairs}
    if len(engines) == 1 and all(said for _, said in pairs):
        return f"{engines.pop()} ({_joined([said for _, said in pairs], '')})"
    return _joined([f"{e} ({said})" if e and said else e for e, said in pairs], "engine not stated by the endpoints")


def _joined(values: list[str], missing: str) -> str:
    """Each arm's value once, in arm order; `missing` when no arm has one."""
    return " / ".join(dict.fromkeys(v for v in values if v)) or missing


def end_facts(session: Session, arm_ids: list[str], selection: RunSelection = DEFAULT_SELECTION) -> EndFacts:
    """Model, hardware, engine and recording date of the arms raced: from the endpoint's own
    fingerprint where it said them, else from the config's declared settings ("hardware" in
    [arms.settings] or [session]), else (hardware) the GPUs NVML named before the arm; a fact
    none gave is said to be missing."""
    arms = [session.arm(a) for a in arm_ids]
    dates = sorted({r["started_at"][:10] for a in arms for r in a.recorded if r.get("started_at")})
    dates = dates or ([session.created_at[:10]] if session.created_at else [])
    verb = "imported" if all(a.imported for a in arms) else "recorded"  # an import's session is made when it is imported
    engines = _joined([_engine(a)[0] for a in arms], "engine not stated by the endpoints")
    if session.simulated:
        hardware, engine = "simulated endpoints, no GPU", "tokenreel simulate (behaves like vLLM)"
        engines = "tokenreel simulate"
    else:
        declared = [a.settings.get("hardware") or fingerprint_summary(a).get("hardware", "") or gpu_hardware(a.gpu) for a in arms]
        hardware = _joined(declared, "hardware not stated (config: [session] hardware)")
        engine = _engines(arms)
    return EndFacts(
        model=_joined([a.model for a in arms], "model not archived"),
        hardware=hardware,
        engine=engine,
        engines=engines,
        recorded=f"{verb} {dates[0]}" + (f" to {dates[-1]}" if len(dates) > 1 else "") if dates else "recording date not archived",
        accuracy=end_line(session, arm_ids, selection),
    )
