"""tokenreel: record serving configurations one arm at a time, replay them as video.

A library user needs the session model and its file:

    from tokenreel import load, save, Session, Run, Arm, Prompt, Settings

Where each concept of the core lives (the rooms build on it: recorder/, renderer/, simulator/,
report/; cli/ is the top floor):

- model.py: the session model and the file format it documents (Session, Run, Chunks, limits)
- model_file.py: a session as the JSON object its file holds
- validate.py: reading a session back, every field checked
- quarantine.py: impossible server values bounded, or the run kept as invalid without them
- field_reader.py: typed access to parsed JSON, each failure naming its dotted field
- archive.py: the session file on disk: load, atomic save, one writer at a time (SessionLock)
- files.py: every file read through one bounded reader, every output through one atomic writer
- metrics.py: the metric definitions (TTFT, decode, TPOT, end-to-end) of one run
- selection.py: which runs count (contended, client-busy, host-contended)
- ladder.py: per-cell medians, like-for-like flags and ratios between arms
- claims.py: every speed-up a view shows (metric, scope, arms), defined once
- intervals.py: the 95 % interval of every ratio over prompts; the stopping rule's looks and level
- planning.py: how many prompts a target interval needs, from a pilot session
- latency.py: p50/p90/p99 of TTFT, TPOT and inter-token latency
- answers.py: whether the arms give the same answers
- drafting.py: which arm a drafter drafts for (its answers are checked against that arm's)
- engine_figures.py, engine_archive.py: what the engine said of each request, beside our figures
- gpu.py, gpu_validate.py: the GPU gate's archive, read back and bounded
- comparison.py: two recordings of one ladder, figure by figure
- verdicts.py: same, faster, slower or can't tell yet: a difference judged by its interval
- figures.py: one rounding for every figure shown
- theme.py: colour themes, shared by the charts and the video
- safe_text.py: text from outside made safe to print and to name files with
- interrupts.py: Ctrl-C and SIGTERM, one rule for every long command
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["Arm", "Prompt", "Run", "Session", "Settings", "__version__", "load", "save"]


def __getattr__(name: str) -> Any:
    """The exports, imported on first use: `tokenreel` itself imports nothing, so the command
    line installs its Ctrl-C handler before anything slow loads (`tokenreel.cli`)."""
    if name in ("load", "save"):
        from tokenreel import archive

        return getattr(archive, name)
    if name in __all__:
        from tokenreel import model

        return getattr(model, name)
    raise AttributeError(f"module 'tokenreel' has no attribute {name!r}")
