"""`tokenreel sweep` against a real llama.cpp server with 4 slots (issue 27, item 5).

One llama-server per arm, started with `-np 4` (and `-c` 4 x 2048: llama.cpp splits the context
across its slots), swept over levels 1, 2, 4 through the real CLI: every level ok with its
requests and warmups, the engine's counters per level, 4 requests served at once at level 4, and a
level above the 4 slots refused up front.
Marked `engine`: `make test-fast` leaves it out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engines import models
from tests.engines.servers import Server, ServerError, free_port
from tests.test_engine_llamacpp import PROMPTS, engine, tokenreel, write_config  # noqa: F401 (engine: the fixture)
from tokenreel.session import archive

pytestmark = pytest.mark.engine

SLOTS = 4
LEVELS = (1, 2, 4)
REQUESTS = 8  # measured requests per level: two rounds of 4 at level 4
MAX_TOKENS = 64
SWEEP_TIMEOUT_S = 600  # a bound for a hang: the sweep takes ~15 s here


def _start(tmp: Path, name: str, args: list[str]) -> Server:
    server = Server(name, args, free_port(), tmp / f"{name}.log", parallel=SLOTS)
    try:
        return server.start()
    except ServerError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="module")
def servers(engine: models.Models, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Server]]:  # noqa: F811
    """Two arms with 4 slots each: Q4_0, and Q4_0 + its Q4_0 drafter (draft-simple, 8 tokens)."""
    tmp = tmp_path_factory.mktemp("sweep-engine")
    spec = ["-m", str(engine.q4_0), "-md", str(engine.draft), "--spec-type", "draft-simple", "--spec-draft-n-max", "8"]
    started: dict[str, Server] = {}
    try:
        started["q4_0"] = _start(tmp, "q4_0", ["-m", str(engine.q4_0)])
        started["q4_0-spec"] = _start(tmp, "q4_0-spec", spec)
        yield started
    finally:
        for server in started.values():
            server.stop()


@pytest.fixture(scope="module")
def swept(servers: dict[str, Server], tmp_path_factory: pytest.TempPathFactory):
    """(session, report rows) of one sweep of both arms over 1, 2, 4."""
    tmp = tmp_path_factory.mktemp("sweep")
    # The engine's own prompt cache: with cache_prompt: false (the ladder's fresh prefill) four
    # slots served less than one here (Q4_0 98 tok/s at 1, 86 at 4, twice), not what this test is about.
    config = write_config(tmp, "sweep", servers, max_tokens=MAX_TOKENS, prompt_cache="engine")
    out = tmp / "sweep.json"
    levels = ",".join(map(str, LEVELS))
    done = tokenreel("sweep", "--config", str(config), "--concurrency", levels, "--requests", str(REQUESTS),
                     "--out", str(out), cwd=tmp, timeout=SWEEP_TIMEOUT_S)
    assert done.returncode == 0, f"sweep exited {done.returncode}: {done.stderr.strip()[-600:]}"
    report = tokenreel("report", str(out), "--format", "json", cwd=tmp)
    assert report.returncode == 0, report.stderr
    return archive.load(out), json.loads(report.stdout)["levels"]


def test_every_level_ok_with_its_runs(swept, servers: dict[str, Server]) -> None:
    """Every level ok, each with its N warmups and REQUESTS measured runs, a report row each."""
    session, rows = swept
    assert session.kind == "sweep"
    assert [(r.arm, r.level, r.status) for r in session.levels] == [(a, n, "ok") for a in servers for n in LEVELS]
    for record in session.levels:
        runs = [r for r in session.runs if r.arm == record.arm and r.level == record.level]
        measured = [r for r in runs if not r.warmup]
        # N warmups, then the fill's (flagged warmup, not measured) while the last measured ones ran
        assert len(measured) == REQUESTS and len(runs) >= REQUESTS + record.level, (record.arm, record.level, len(runs))
        assert record.completed + record.failed == REQUESTS, record
        assert all(r.status == "ok" for r in runs if r.warmup), (record.arm, record.level)
        assert record.completed >= 1, record
    assert [(row["arm"], row["level"]) for row in rows] == [(a, n) for a in servers for n in LEVELS]
    for row in rows:
        assert row["status"] == "ok", row
        assert row["output_tokens"] == row["completed"] * MAX_TOKENS, row  # ignore_eos: each runs to max_tokens
        assert row["median_decode_tok_s"] > 0 and row["aggregate_output_tok_s"] > 0, row


def test_every_measured_request_completes(swept) -> None:
    """Every request of every level completes: llama-server closes a connection after a stream
    although it offers keep-alive, so a sweep sends each request on a fresh connection."""
    session, _ = swept
    failed = [(r.arm, r.level, r.index, r.error) for r in session.runs if r.status != "ok"]
    assert not failed, failed
    assert all(record.completed == REQUESTS and record.failed == 0 for record in session.levels), session.levels


def test_counters_per_level(swept) -> None:
    """The engine's /metrics per level: the tokens generated over the measured window (those of
    the completed requests: 512 when all 8 x 64 complete), the running peak, drafts on the drafter arm only."""
    _, rows = swept
    for row in rows:
        counters = row["counters"]
        assert set(counters) >= {"generated_tokens", "drafts", "draft_tokens", "accepted_tokens"}, row
        generated = counters["generated_tokens"]
        assert generated is not None and row["completed"] * MAX_TOKENS <= generated <= (REQUESTS + row["level"]) * MAX_TOKENS, row
        assert row["peak_running"] is not None and 1 <= row["peak_running"] <= row["level"], row
        if row["arm"] == "q4_0-spec":
            assert counters["drafts"] and counters["drafts"] > 0 and row["acceptance_length"] > 1, row
        else:
            assert counters["drafts"] == 0, row


def test_four_slots_run_at_once(swept) -> None:
    """At level 4 the endpoint serves about 4 requests' worth at once: the level's aggregate
    output tok/s is well above one request's decode rate at that level (3.14-3.97x over 4 sweeps
    here on both arms, quiet or beside two CPU hogs), and at level 1 it is not above it (prefill
    leaves gaps between the tokens: 0.89-1.00x). Both figures of a level come from the same seconds, so a test
    beside it that loads the cores moves them together.

    Aggregate tok/s at 4 against at 1 is not held: the levels run one after another, load can
    change between them (184.7 tok/s at 1, 102.0 at 4 seen in the full suite), and with this tiny
    model the client's and server's per-token work weighs as much as the batched step (0.98-1.36x
    on a quiet 2-core machine). `bench/` and the sweep report are where that figure is read.
    """
    _, rows = swept
    ratio = {(row["arm"], row["level"]): row["aggregate_output_tok_s"] / row["median_decode_tok_s"] for row in rows}
    shown = {f"{arm}@{level}": round(value, 2) for (arm, level), value in ratio.items()}
    for arm in ("q4_0", "q4_0-spec"):
        assert ratio[(arm, 4)] > 2.5, shown
        assert ratio[(arm, 1)] < 1.1, shown


def test_level_above_the_slots_is_refused(servers: dict[str, Server], tmp_path: Path) -> None:
    """Level 8 with 4 slots: exit 2 before anything is recorded (llama.cpp's /props total_slots)."""
    config = write_config(tmp_path, "over", {"q4_0": servers["q4_0"]}, max_tokens=MAX_TOKENS)
    out = tmp_path / "over.json"
    done = tokenreel("sweep", "--config", str(config), "--concurrency", "1,8", "--requests", "2", "--out", str(out),
                     cwd=tmp_path, timeout=120)
    assert done.returncode == 2, f"exit {done.returncode}: {done.stderr.strip()[-400:]}"
    said = done.stderr + done.stdout
    assert "level 8 is above the 4 requests arm 'q4_0' serves at once" in said, said
    assert not out.exists() or not archive.load(out).runs
