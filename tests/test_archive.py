"""The session archive: round trip, atomic save, and validation errors that name the field."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson
import pytest

from tokenreel.session import archive
from tokenreel.session.json_form import session_to_dict
from tokenreel.session.model import Acceptance, ArchiveError, Arm, Chunks, Gate, Prompt, Run, Session, Settings


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
        response_id="chatcmpl-1",
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


def test_a_run_without_a_response_id_is_written_without_the_key() -> None:
    """Files recorded before response ids existed stay byte-identical when saved again."""
    data = orjson.loads(archive.dumps(small_session()))
    del data["runs"][0]["response_id"]
    session = archive.loads(orjson.dumps(data), "old.json")
    assert session.runs[0].response_id is None
    assert archive.dumps(session) == orjson.dumps(data)


def test_save_leaves_no_temp_files_and_replaces_atomically(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    archive.save(small_session(), path)
    archive.save(small_session(), path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


def test_empty_text_columns_are_left_out(tmp_path: Path) -> None:
    data = session_to_dict(small_session())
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
        (lambda d: d["runs"][0].update(response_id="x" * 257), "runs[0].response_id", "at most 256 characters"),
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


def test_save_keeps_a_run_the_loader_would_reject_as_invalid(tmp_path: Path) -> None:
    """A usage jump of 2M tokens in one event: the run is quarantined, the file still loads."""
    session = small_session()
    session.runs[0].chunks.tokens[2] = 2_000_000
    path = tmp_path / "s.json"
    archive.save(session, path)
    run = archive.load(path).runs[0]
    assert run.status == "invalid" and len(run.chunks) == 0
    assert "chunks.tokens[2]: expected a token count from 0 to 1000000, got 2000000" in run.error
    assert run.error.endswith("`tokenreel record --resume` records it again") and "\n" not in run.error
    assert run.usage == {"prompt_tokens": 5, "completion_tokens": 4}  # only the bad part is dropped


def test_save_quarantines_each_bad_part_of_a_run(tmp_path: Path) -> None:
    session = small_session()
    session.runs[0].gate.running = -1.0  # a negative /metrics gauge
    session.runs[0].usage = {"completion_tokens": 10**20}
    path = tmp_path / "s.json"
    archive.save(session, path)
    run = archive.load(path).runs[0]
    assert run.status == "invalid" and "gate.running" in run.error and "usage.completion_tokens" in run.error
    assert run.gate.running is None and run.gate.status == "idle" and run.usage is None
    assert len(run.chunks) == 4  # the stream itself was fine


def test_save_writes_nothing_the_loader_rejects(tmp_path: Path) -> None:
    session = small_session()
    path = tmp_path / "s.json"
    archive.save(session, path)
    before = path.read_bytes()
    session.arms.append(copy.deepcopy(session.arms[0]))  # not a server value: refused, not quarantined
    with pytest.raises(ArchiveError, match=r"arms\[1\]\.id.*duplicate"):
        archive.save(session, path)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [("mean_length", 1e308, "acceptance length 1e+308"), ("mean_length", 0.5, "acceptance length 0.5"),
     ("rate", 1.5, "acceptance rate 1.5"), ("accepted", 1e300, "accepted token count 1e+300")],
)
def test_impossible_acceptance_figures_become_none_with_a_note(tmp_path: Path, name: str, value: float, words: str) -> None:
    session = small_session()
    setattr(session.runs[0].acceptance, name, value)
    for loaded in (archive.loads(archive.dumps(session), "x.json"), None):  # bounded at load, and at save
        if loaded is None:
            archive.save(session, tmp_path / "s.json")
            loaded = archive.load(tmp_path / "s.json")
        run = loaded.runs[0]
        assert getattr(run.acceptance, name) is None and run.status == "ok"
        assert words in run.acceptance_note
