"""The session archive: round trip, atomic save, and validation errors that name the field."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson
import pytest

from tokenreel import archive
from tokenreel.archive import Acceptance, Arm, ArchiveError, Chunks, Gate, Prompt, Run, Session, Settings


def small_session() -> Session:
    chunks = Chunks()
    chunks.append(600_000_000, 0)  # role chunk
    chunks.append(600_100_000, 1, "Hello")
    chunks.append(610_000_000, 3, " wor", reasoning="think")
    chunks.append(620_000_000, 0)  # usage-only tail
    run = Run(
        arm="a",
        prompt="p1",
        index=1,
        warmup=False,
        http_status=200,
        finish_reason="length",
        usage={"prompt_tokens": 5, "completion_tokens": 4},
        token_source="usage_delta",
        gate=Gate(status="idle", running=0.0, waiting=0.0, waited_s=0.0),
        contended=False,
        acceptance=Acceptance(mean_length=2.5, rate=0.25, drafts=2.0, draft_tokens=14.0, accepted=3.0, source="metrics"),
        chunks=chunks,
    )
    return Session(
        name="t",
        settings=Settings(max_tokens=4),
        prompts=[Prompt(id="p1", category="code", messages=[{"role": "user", "content": "hi"}], prompt="")],
        arms=[Arm(id="a", label="A", base_url="http://127.0.0.1:1/v1", model="m", api_key_env="KEY_ENV")],
        runs=[run],
        tool_version="0.1.0",
    )


def test_round_trip_keeps_everything(tmp_path: Path) -> None:
    session = small_session()
    path = tmp_path / "s.json"
    archive.save(session, path)
    loaded = archive.load(path)
    assert loaded == session
    assert archive.dumps(loaded) == path.read_bytes()


def test_save_leaves_no_temp_files_and_replaces_atomically(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    archive.save(small_session(), path)
    archive.save(small_session(), path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


def test_empty_text_columns_are_left_out(tmp_path: Path) -> None:
    data = archive.session_to_dict(small_session())
    chunks = data["runs"][0]["chunks"]
    assert "tool" not in chunks and "content" in chunks and "reasoning" in chunks


def _mutated(mutate) -> bytes:
    data = orjson.loads(archive.dumps(small_session()))
    mutate(data)
    return orjson.dumps(data)


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda d: d.update(format="other"), "format", "not a tokenreel session"),
        (lambda d: d.update(version=99), "version", "newer"),
        (lambda d: d.pop("name"), "name", "missing"),
        (lambda d: d["settings"].update(max_tokens="many"), "settings.max_tokens", "integer"),
        (lambda d: d["runs"][0]["chunks"]["t_ns"].__setitem__(2, 1), "runs[0].chunks.t_ns[2]", "back in time"),
        (lambda d: d["runs"][0]["chunks"]["t_ns"].__setitem__(0, -5), "runs[0].chunks.t_ns[0]", "negative"),
        (lambda d: d["runs"][0]["chunks"]["tokens"].pop(), "runs[0].chunks.tokens", "entries"),
        (lambda d: d["runs"][0].update(arm="ghost"), "runs[0].arm", "unknown arm"),
        (lambda d: d["runs"][0].update(status="great"), "runs[0].status", "one of"),
        (lambda d: d["runs"][0]["acceptance"].update(mean_length=-1.0), "runs[0].acceptance.mean_length", "negative"),
        (lambda d: d["arms"].append(copy.deepcopy(d["arms"][0])), "arms[1].id", "duplicate"),
    ],
)
def test_validation_names_the_field(mutate, field: str, words: str) -> None:
    with pytest.raises(ArchiveError) as caught:
        archive.loads(_mutated(mutate), "x.json")
    assert caught.value.field == field
    assert words in str(caught.value)
    assert str(caught.value).startswith("x.json")


def test_nan_is_rejected() -> None:
    payload = archive.dumps(small_session()).replace(b'"mean_length":2.5', b'"mean_length":NaN')
    with pytest.raises(ArchiveError, match="not valid JSON"):
        archive.loads(payload, "x.json")


def test_truncated_file_says_so(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(archive.dumps(small_session())[:-40])
    with pytest.raises(ArchiveError, match="truncated"):
        archive.load(path)


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match="no such file"):
        archive.load(tmp_path / "absent.json")
    (tmp_path / "empty.json").write_bytes(b"")
    with pytest.raises(ArchiveError, match="empty"):
        archive.load(tmp_path / "empty.json")
