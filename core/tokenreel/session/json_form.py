"""A Session as the JSON object its file holds (the file's shape; `tokenreel.session.validate` reads it
back, `tokenreel.session.archive` writes it). Kept apart from the model so each reads in minutes."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from tokenreel.session.model import (
    ACCEPTANCE_POSITIONS,
    ENGINE_DURATIONS,
    FORMAT,
    HOST_LOAD_FIELDS,
    VERSION,
    Arm,
    Chunks,
    Prompt,
    Run,
    Session,
)


def _chunks_to_json(chunks: Chunks) -> dict[str, Any]:
    """Columns that are all empty strings are left out to keep the file small."""
    out: dict[str, Any] = {"t_ns": chunks.t_ns, "tokens": chunks.tokens}
    for name in ("content", "reasoning", "tool"):
        column = getattr(chunks, name)
        if any(column):
            out[name] = column
    if chunks.client_delay_us:
        out["client_delay_us"] = chunks.client_delay_us
    return out


def session_to_dict(session: Session) -> dict[str, Any]:
    """The object a session file holds: format and version first, then Session's fields in order."""
    head, tail = session_fields(session)
    return {**head, "runs": [run_to_dict(run) for run in session.runs], **tail}


def session_fields(session: Session) -> tuple[dict[str, Any], dict[str, Any]]:
    """The file's fields other than `runs`: those before it (format, version, name, settings,
    prompts, arms) and those after it, each in the file's order."""
    head: dict[str, Any] = {"format": FORMAT, "version": VERSION}
    tail: dict[str, Any] = {}
    out = head
    for name in Session.__dataclass_fields__:
        value = getattr(session, name)
        if name == "runs":
            out = tail
        elif name == "settings":
            out[name] = asdict(value)
        elif name == "prompts":
            out[name] = [_prompt_to_dict(item) for item in value]
        elif name == "arms":
            out[name] = [_arm_to_dict(arm) for arm in value]
        elif name == "stopping":
            if value is not None:
                out[name] = asdict(value)
        elif name == "kind":
            if value != "ladder":
                out[name] = value
        elif name == "levels":
            if value:
                out[name] = [asdict(item) for item in value]
        else:
            out[name] = value
    return head, tail


def _prompt_to_dict(prompt: Prompt) -> dict[str, Any]:
    """asdict, leaving out `grading` when the prompt is not graded: older files stay byte-identical."""
    out = asdict(prompt)
    if prompt.grading is None:
        del out["grading"]
    return out


def _arm_to_dict(arm: Arm) -> dict[str, Any]:
    """asdict, leaving out replica lists (one replica), GPU checks (none), drafts_for (not
    declared) and imported (recorded) when empty: older files stay byte-identical."""
    return {k: v for k, v in asdict(arm).items() if v or k not in ("base_urls", "metrics_urls", "gpu", "drafts_for", "imported")}


# Run's parts that are flat dataclasses of scalars, and its fields left out of the file when None.
_FLAT_PARTS = frozenset(("gate", "acceptance", "clock", "host", "engine", "grade"))
_ABSENT_WHEN_NONE = frozenset(("level", "replica", "node", "response_id", "served_model", "engine", "grade"))
# Fields of a flat part left out when None (members added to format version 1 later: older
# files load and save again to the same bytes).
_PART_ABSENT_WHEN_NONE = frozenset((*ENGINE_DURATIONS, *ACCEPTANCE_POSITIONS, *HOST_LOAD_FIELDS))


def run_to_dict(run: Run) -> dict[str, Any]:
    """What asdict gives, without deep-copying anything (the chunk columns can be huge, and a save
    encodes every run): a flat part's fields as they are. Fields absent when None are left out."""
    out: dict[str, Any] = {}
    for name in Run.__dataclass_fields__:
        value = getattr(run, name)
        if name == "chunks":
            out[name] = _chunks_to_json(value)
        elif value is None:
            if name not in _ABSENT_WHEN_NONE:
                out[name] = None
        elif name in _FLAT_PARTS:
            out[name] = {field: part for field in value.__dataclass_fields__
                         if (part := getattr(value, field)) is not None or field not in _PART_ABSENT_WHEN_NONE}
        else:
            out[name] = value
    return out
