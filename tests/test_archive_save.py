"""Saving after every run costs what changed: only new or changed runs are validated, yet every
save is refused, quarantined or written exactly as a save of the whole session from scratch."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest

from tokenreel.session import archive, save_form
from tokenreel.session.fields import FieldReader
from tokenreel.session.json_form import session_to_dict
from tokenreel.session.model import ArchiveError, LevelRecord, Run, Session
from tokenreel.session.stopping import Stopping

from .test_archive import small_session


def from_scratch(session: Session) -> bytes:
    return orjson.dumps(session_to_dict(session))


def grown(runs: int) -> Session:
    """small_session with `runs` copies of its run (distinct objects, indexes 0 to runs - 1)."""
    session = small_session()
    template = session.runs[0]
    session.settings.repeats = runs
    session.runs = [copy.deepcopy(template) for _ in range(runs)]
    for index, run in enumerate(session.runs):
        run.index = index
    return session


def another(session: Session) -> Run:
    run = copy.deepcopy(session.runs[0])
    run.index = len(session.runs)
    return run


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The `runs[i]` of every run a save validates."""
    seen: list[str] = []
    real = save_form.read_run

    def counting(r: FieldReader, data: Any, where: str) -> Run:
        seen.append(where)
        return real(r, data, where)

    monkeypatch.setattr(save_form, "read_run", counting)
    return seen


def test_a_save_validates_only_the_run_appended_since_the_last(tmp_path: Path, validations: list[str]) -> None:
    session, path = grown(20), tmp_path / "s.json"
    archive.save(session, path)
    assert len(validations) == 20
    validations.clear()
    session.runs.append(another(session))
    archive.save(session, path)
    assert validations == ["runs[20]"]
    assert path.read_bytes() == from_scratch(session)
    assert archive.load(path) == session


def test_a_run_changed_in_place_is_validated_again(tmp_path: Path, validations: list[str]) -> None:
    session, path = grown(5), tmp_path / "s.json"
    archive.save(session, path)
    validations.clear()
    session.runs[2].chunks.content[1] = "Hi"  # same object, same lengths: only its bytes tell
    archive.save(session, path)
    assert validations == ["runs[2]"]
    assert archive.load(path).runs[2].chunks.content[1] == "Hi"


def test_a_run_replaced_by_an_equal_copy_is_validated_again(tmp_path: Path, validations: list[str]) -> None:
    session, path = grown(5), tmp_path / "s.json"
    archive.save(session, path)
    validations.clear()
    session.runs[3] = copy.deepcopy(session.runs[3])
    archive.save(session, path)
    assert validations == ["runs[3]"]


def test_an_invalid_run_appended_is_still_quarantined(tmp_path: Path) -> None:
    session, path = grown(5), tmp_path / "s.json"
    archive.save(session, path)
    bad = another(session)
    bad.chunks.t_ns[2] = 1  # goes back in time: the server's part, dropped
    session.runs.append(bad)
    archive.save(session, path)
    loaded = archive.load(path)
    assert loaded.runs[5].status == "invalid" and "runs[5]" not in loaded.runs[5].error
    assert "chunks.t_ns[2]: goes back in time" in loaded.runs[5].error
    assert len(loaded.runs[5].chunks) == 0
    assert [run.status for run in loaded.runs[:5]] == ["ok"] * 5
    assert path.read_bytes() == from_scratch(session)


def test_a_saved_run_broken_in_place_is_quarantined_or_refused(tmp_path: Path) -> None:
    session, path = grown(5), tmp_path / "s.json"
    archive.save(session, path)
    session.runs[1].chunks.tokens[1] = -3  # the server's part: the run is kept invalid
    archive.save(session, path)
    assert archive.load(path).runs[1].status == "invalid"
    before = path.read_bytes()
    session.runs[4].status = "bogus"  # the recorder's own part: a bug, nothing written
    with pytest.raises(ArchiveError, match="status.*bogus"):
        archive.save(session, path)
    assert path.read_bytes() == before


def test_a_run_naming_an_arm_removed_since_it_was_saved_is_refused(tmp_path: Path) -> None:
    """Which arm and prompt a run names is checked at every save, not remembered."""
    session, path = grown(3), tmp_path / "s.json"
    archive.save(session, path)
    session.runs[0].arm = "gone"
    with pytest.raises(ArchiveError, match=r"runs\[0\]\.arm.*unknown arm"):
        archive.save(session, path)


def test_the_bytes_equal_a_whole_encode_with_the_fields_after_the_runs(tmp_path: Path) -> None:
    """A sweep under a stopping rule: the fields after `runs` (stopping, kind, levels) are joined in order."""
    session, path = grown(4), tmp_path / "s.json"
    session.kind = "sweep"
    for run in session.runs:
        run.level = 2
    session.levels = [LevelRecord(arm="a", level=2, requests=4, completed=4, before={"running": 0.0})]
    session.stopping = Stopping(target=0.05, level=0.95, looks=[1], order=["p1"], seed=3)
    archive.save(session, path)
    session.runs.append(another(session))
    archive.save(session, path)
    assert path.read_bytes() == from_scratch(session)
    assert archive.load(path) == session


def test_an_empty_session_saves_as_a_whole_encode(tmp_path: Path) -> None:
    session, path = grown(0), tmp_path / "s.json"
    archive.save(session, path)
    assert path.read_bytes() == from_scratch(session)
