"""What `tokenreel.session.archive.save` writes: the session checked by the loader's own validation,
encoded run by run, with each run's work remembered so that a save costs what changed.

The recorder saves the whole session after every run. Validating every run's every chunk each
time made the N-th save cost N runs of Python; here a run is validated only when it is new or
changed. Each run's encoded bytes are remembered with the run object (by identity, a weak
reference guarding against a reused id): a run whose bytes equal those remembered was validated
as exactly those bytes and is not validated again; any other (new, replaced, or changed in
place) is validated as the loader validates it and, if it fails, quarantined
(`tokenreel.session.quarantine`), then remembered. Everything else the file holds (settings,
prompts, arms, levels, which arm and prompt each run names) is small and is validated whole at
every save. The file's bytes are `orjson.dumps(session_to_dict(session))`, joined from the parts.

Encoding every run and writing the whole file stay proportional to the session's size (the file
is rewritten atomically, whole): that part runs in orjson, a memcmp and the write.
"""

from __future__ import annotations

import weakref
from typing import Any

import orjson

from tokenreel.session.acceptance_validate import bound_acceptance
from tokenreel.session.fields import FieldReader
from tokenreel.session.json_form import run_to_dict, session_fields
from tokenreel.session.model import ArchiveError, Run, Session
from tokenreel.session.quarantine import quarantine
from tokenreel.session.validate import from_dict, read_run

# id(run) -> (a weak reference to that run, the bytes it was validated as). An entry leaves
# with its run; the weak reference tells a live run from a later object given the same id.
_validated: dict[int, tuple[weakref.ref[Run], bytes]] = {}


def _forget(ref: weakref.ref[Run], key: int) -> None:
    entry = _validated.get(key)
    if entry is not None and entry[0] is ref:
        del _validated[key]


def _remembered(run: Run) -> bytes | None:
    entry = _validated.get(id(run))
    return entry[1] if entry is not None and entry[0]() is run else None


def _remember(run: Run, encoded: bytes) -> None:
    key = id(run)
    entry = _validated.get(key)
    ref = entry[0] if entry is not None and entry[0]() is run else weakref.ref(run, lambda dead: _forget(dead, key))
    _validated[key] = (ref, encoded)


class _RunParts:
    """`from_dict`'s reader of `runs[]` for a save: each item a Run of the session being saved,
    checked unless unchanged, its bytes kept in order for the file."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def __call__(self, r: FieldReader, item: Any, where: str) -> Run:
        run: Run = item
        data = run_to_dict(run)
        try:
            encoded: bytes | None = orjson.dumps(data)
        except orjson.JSONEncodeError:  # an integer past 64 bits, say: validation names it
            encoded = None
        if encoded is None or _remembered(run) != encoded:
            try:
                read_run(r, data, where)
            except ArchiveError:
                if not quarantine(run, r.path):
                    raise
                return self(r, run, where)  # once more: quarantined, it is valid without its offending parts
            encoded = orjson.dumps(data) if encoded is None else encoded  # valid yet not encodable: raises as a whole save did
            _remember(run, encoded)
        self.parts.append(encoded)
        return run


def _joined(head: bytes, runs: list[bytes], tail: bytes) -> list[bytes]:
    """The pieces of one object holding head's fields, then `runs`, then tail's (each an orjson
    object), in order: written one after another, without a copy of the whole file."""
    pieces = [head[:-1], b',"runs":[']
    for i, part in enumerate(runs):
        if i:
            pieces.append(b",")
        pieces.append(part)
    pieces.append(b"]")
    pieces.append(b"," + tail[1:] if tail != b"{}" else b"}")
    return pieces


def validated_bytes(session: Session, path: str = "<session>") -> list[bytes]:
    """The bytes `save` writes, in pieces: together those of `session_to_dict(session)`, checked by the loader's own
    `from_dict` (`tokenreel.session.validate`'s rule 1). A run that fails it is quarantined in
    place; anything else that would not load raises ArchiveError, so nothing is written."""
    for run in session.runs:
        bound_acceptance(run)
    head, tail = session_fields(session)
    runs = _RunParts()
    from_dict({**head, "runs": session.runs, **tail}, path, runs)
    return _joined(orjson.dumps(head), runs.parts, orjson.dumps(tail))
