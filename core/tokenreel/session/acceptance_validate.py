"""Reading a run's acceptance back, and the bounds on it (docs/session-format.md §7.4, §12.2):
the counts a drafter reports, per draft position too, and the rule that drops a value no drafter
can produce (`bound_acceptance`, applied at save and at load alike)."""

from __future__ import annotations

import math
from typing import Any, Callable

from tokenreel.session.fields import FieldReader
from tokenreel.session.model import ACCEPTANCE_POSITIONS, MAX_ACCEPTANCE_LENGTH, MAX_COUNT, MAX_DRAFT_POSITIONS, Acceptance, Run


def read_acceptance(r: FieldReader, data: Any, where: str) -> Acceptance | None:
    """A run's `acceptance`, bounded after (docs/session-format.md §7.4, §12.2)."""
    if data is None:
        return None
    d = r.obj(data, where)
    return Acceptance(
        mean_length=r.get(d, "mean_length", where, r.opt_num, None),
        rate=r.get(d, "rate", where, r.opt_num, None),
        drafts=r.get(d, "drafts", where, r.opt_num, None),
        draft_tokens=r.get(d, "draft_tokens", where, r.opt_num, None),
        accepted=r.get(d, "accepted", where, r.opt_num, None),
        source=r.get(d, "source", where, r.str_, ""),
        approximate=r.get(d, "approximate", where, r.bool_, False),
        note=r.get(d, "note", where, r.str_, ""),
        accepted_per_position=r.get(d, "accepted_per_position", where, _position_counts(r), None),
        drafted_per_position=r.get(d, "drafted_per_position", where, _position_counts(r), None),
    )


def _position_counts(r: FieldReader) -> Callable[[Any, str], list[float] | None]:
    """An acceptance's per-position counts: null, or a list of at most MAX_DRAFT_POSITIONS
    non-negative numbers (§7.4)."""
    def read(value: Any, where: str) -> list[float] | None:
        if value is None:
            return None
        items = r.list_(value, where)
        if len(items) > MAX_DRAFT_POSITIONS:
            raise r.fail(where, f"has {len(items)} positions, more than {MAX_DRAFT_POSITIONS}")
        return [r.nonneg_num(item, f"{where}[{i}]") for i, item in enumerate(items)]

    return read


_ACCEPTANCE_BOUNDS = (
    ("mean_length", "acceptance length", 1.0, MAX_ACCEPTANCE_LENGTH),
    ("rate", "acceptance rate", 0.0, 1.0),
    ("drafts", "draft count", 0.0, float(MAX_COUNT)),
    ("draft_tokens", "draft token count", 0.0, float(MAX_COUNT)),
    ("accepted", "accepted token count", 0.0, float(MAX_COUNT)),
)


def bound_acceptance(run: Run) -> None:
    """Drop acceptance figures no drafter can produce to None, the reason in acceptance_note
    (this module's rule 2, docs/session-format.md §12.2): one `mean_acceptance_length: 1e308`
    would overflow every later mean.
    Idempotent."""
    acceptance = run.acceptance
    if acceptance is None:
        return
    dropped = []
    for name, label, low, high in _ACCEPTANCE_BOUNDS:
        value = getattr(acceptance, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue  # None, or a wrong type that validation names
        if not (math.isfinite(value) and low <= value <= high):
            setattr(acceptance, name, None)
            dropped.append(f"{label} {value:g} (outside {low:g} to {high:g})")
    for name in ACCEPTANCE_POSITIONS:
        counts = getattr(acceptance, name)
        if isinstance(counts, list) and any(isinstance(v, (int, float)) and v > MAX_COUNT for v in counts):
            setattr(acceptance, name, None)
            dropped.append(f"{name.replace('_', ' ')} (a count above {MAX_COUNT:g})")
    if dropped:
        note = f"the server reported an impossible {', '.join(dropped)}; dropped"
        run.acceptance_note = f"{run.acceptance_note}; {note}" if run.acceptance_note else note
