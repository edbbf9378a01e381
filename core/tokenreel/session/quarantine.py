"""Impossible values from a server: bounded or quarantined, never saved as a file the loader
rejects. A run whose values the loader would refuse is marked `invalid` with the
reason, its offending figures dropped, so the rest of the session stays loadable."""

from __future__ import annotations

import re
from typing import Callable

from tokenreel.session.acceptance_validate import bound_acceptance
from tokenreel.session.fields import FieldReader
from tokenreel.session.json_form import run_to_dict
from tokenreel.session.model import GATE_STATUSES, ArchiveError, Chunks, Gate, Run
from tokenreel.session.validate import read_run


def _drop_chunks(run: Run) -> None:
    run.chunks = Chunks()


def _drop_usage(run: Run) -> None:
    run.usage = None


def _drop_gate_figures(run: Run) -> None:
    status = run.gate.status if run.gate.status in GATE_STATUSES else "unavailable"
    run.gate = Gate(status=status, detail=run.gate.detail if isinstance(run.gate.detail, str) else "")


def _drop_acceptance(run: Run) -> None:
    run.acceptance = None


# The parts of a run that carry values from the server, and how each is dropped.
_DROPPABLE: dict[str, Callable[[Run], None]] = {
    "chunks": _drop_chunks,
    "usage": _drop_usage,
    "gate": _drop_gate_figures,
    "acceptance": _drop_acceptance,
    "engine": lambda run: setattr(run, "engine", None),
}


def quarantine(run: Run, path: str = "<session>") -> str:
    """Validate one run as the loader does; if it fails, mark it `invalid` (`tokenreel.session.validate`'s
    rule 1, docs/session-format.md §12.1).

    Server values it catches: a usage jump of more than MAX_TOKENS_PER_EVENT in one event, a
    negative /metrics gauge, more than MAX_CHUNKS_PER_RUN events. Each offending part is
    dropped and named in `error`. Returns that reason ("" for a valid run); raises ArchiveError
    for a problem in a part the recorder itself sets (a bug, not the server's).
    """
    bound_acceptance(run)
    reasons: list[str] = []
    for _ in range(len(_DROPPABLE) + 1):
        try:
            read_run(FieldReader(path), run_to_dict(run), "run")
        except ArchiveError as exc:
            where = exc.field.removeprefix("run.")
            part = re.split(r"[.\[]", where, maxsplit=1)[0]
            if part not in _DROPPABLE or any(r.startswith(part) for r in reasons):
                raise
            reasons.append(f"{where}: {exc.problem}")
            _DROPPABLE[part](run)
            continue
        break
    if not reasons:
        return ""
    dropped = ", ".join(dict.fromkeys(r.split(".")[0].split("[")[0].split(":")[0] for r in reasons))
    return mark_invalid(run, "; ".join(reasons), dropped)


def mark_invalid(run: Run, reason: str, dropped: str) -> str:
    """Mark a run whose offending parts were dropped `invalid`, with the one line that says so
    (`quarantine`, and the recorder for a running count that jumps or goes back while streaming)."""
    run.status = "invalid"
    run.error = (
        f"invalid: the server sent an impossible value ({reason}); the run is kept without its"
        f" {dropped}: check the endpoint, then `tokenreel record --resume` records it again"
    )
    return run.error
