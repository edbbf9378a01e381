"""What a finished recording says and how it exits, decided once for `record` and `demo`.

The exit code follows the endpoint, not the machine: 1 only when the endpoint failed
a run (errors, timeouts, a wrong length, a busy endpoint, other traffic during a run); runs the
recorder took on a busy machine are kept when their times are exact, and said in one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tokenreel.analysis.ladder import MissingCell, missing_cells
from tokenreel.analysis.replica_ladders import served_model_lines
from tokenreel.analysis.selection import DEFAULT_SELECTION
from tokenreel.recorder.runner import RecordResult
from tokenreel.session.model import Session

ENDPOINT_FAULTS = ("failed", "skipped", "invalid", "contended")


@dataclass
class Outcome:
    """The lines to say after the summary (in order) and the exit code."""

    lines: list[str] = field(default_factory=list)
    exit_code: int = 0


def endpoint_caused(session: Session, cell: MissingCell) -> bool:
    """A missing cell whose runs the endpoint spoiled (failed, skipped, invalid, contended by
    other traffic), not this machine's load."""
    return any(DEFAULT_SELECTION.left_out_because(run) in ENDPOINT_FAULTS for run in session.runs_of(cell.arm, cell.prompt))


def busy_machine_line(result: RecordResult) -> str:
    """One line counting the runs recorded on a busy machine and what became of them, or ""."""
    parts = [
        f"{result.client_busy} recorded while this machine kept the recorder waiting (exact: kernel receive times)"
        if result.client_busy else "",
        f"{result.retried} retried because the machine was too busy for exact user-clock times" if result.retried else "",
        f"{result.host_contended} recorded while the engine's host was under CPU pressure (kept, flagged"
        " host_contended)" if result.host_contended else "",
    ]
    said = [part for part in parts if part]
    return "busy machine: measured runs " + "; ".join(said) + "." if said else ""


# `record --target-ci` stopped (a budget, the suite) before every interval reached its target: the
# runs are fine, the answer is not known to the width asked for (as `compare`'s "can't tell yet").
TARGET_NOT_MET = 3


def outcome(session: Session, result: RecordResult, arm_ids: list[str] | None, targeted: bool = False) -> Outcome:
    """What to say after a recording that was not interrupted, and its exit code (`targeted`: this
    recording had --target-ci, so a target not met is its exit code when nothing else failed)."""
    done = Outcome()
    busy = busy_machine_line(result)
    if busy:
        done.lines.append(busy)
    # Cells whose runs all completed yet none counts (contended, late user-clock times): a failed
    # run already had its own line. A cell with no usable run is in no figure: never silently.
    missing = [
        cell for cell in missing_cells(session)
        if (arm_ids is None or cell.arm in arm_ids) and cell.runs
        and all(run.status == "ok" for run in session.runs_of(cell.arm, cell.prompt))
    ]
    done.lines += [f"{cell.arm} / {cell.prompt}: {cell.reason}" for cell in missing]
    if missing:
        done.lines.append(f"{len(missing)} cell(s) have no usable run (lines above); `tokenreel record --resume` re-records their runs")
    if result.short:
        done.lines.append(f"{result.short} measured run(s) missed the forced length (lines above): check ignore_eos support"
                          " and max_model_len of the endpoint")
    done.lines += result.lost
    if result.lost:
        done.lines.append(f"{len(result.lost)} recorder worker(s) lost (lines above): `tokenreel record --resume --ray ...`"
                          " records the runs they had not finished")
    mixed = served_model_lines(session)
    done.lines += mixed
    faulted = result.failed or result.skipped or result.invalid
    if faulted:
        done.lines.append("some runs failed, were skipped or invalid (lines above); `tokenreel record --resume` retries them")
    if faulted or mixed or result.lost or result.short or any(endpoint_caused(session, cell) for cell in missing):
        done.exit_code = 1
    if session.stopping is not None:
        done.lines.append(stopping_line(session))
        if targeted and session.stopping.stopped != "target met" and done.exit_code == 0:
            done.exit_code = TARGET_NOT_MET
    return done


def stopping_line(session: Session) -> str:
    """Where `record --target-ci` stands: which targets were met, and how far it got."""
    rule = session.stopping
    assert rule is not None
    prompts = rule.looked[-1] if rule.looked else 0
    widths = ", ".join(
        f"{name} ±{100 * w:.1f} %" + (" met" if w <= rule.target else " not met") if w is not None else f"{name} no interval yet"
        for name, w in rule.widths.items()
    )
    where = f"{prompts} of {len(rule.order)} prompts drawn, look {len(rule.looked)} of {len(rule.looks)}"
    if rule.stopped == "target met":
        return f"target ±{100 * rule.target:g} % met: {widths} ({where})"
    why = f"stopped: {rule.stopped}" if rule.stopped else "not finished"
    more = "" if rule.stopped in ("suite used up", "max prompts") else "; `tokenreel record --resume --target-ci` goes on"
    return f"target ±{100 * rule.target:g} % not met ({why}): {widths or 'no look yet'} ({where}){more}"
