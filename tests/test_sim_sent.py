"""The simulator's log of what it sent (GET /sim/sent), for every engine shape: `tokenreel
record` runs against it in its own process, and simulator/tokenreel/simulator/truth.py pairs each run with the
stream it was sent, token counts and all, and finds the recorded times inside the writes'.
A sweep's runs, many in flight at once, pair by their response ids just as well."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.test_busy_host import DECODE_PCT, TTFT_MS
from tests.test_cli import run_cli, write_config
from tests.test_sweep import _most_in_flight
from tokenreel.session import archive
from tokenreel.simulator.profiles import ENGINES, SEED_LADDER
from tokenreel.simulator.truth import RunTruth, fetch_sent, pair, session_truth

# A plain arm (one token per step) and a speculative one (several per step: one chunk for vLLM
# and SGLang, one event per token in one write for llama.cpp).
PROFILES = (SEED_LADDER[0], SEED_LADDER[2])


@pytest.mark.parametrize("engine", ENGINES)
def test_every_recorded_run_pairs_with_what_was_sent(tmp_path: Path, make_sim, engine: str) -> None:
    cluster = make_sim([replace(p, engine=engine) for p in PROFILES], time_scale=0.1)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=48, repeats=1, prompts="builtin:ladder4")
    record = run_cli("record", "--config", config, "--out", tmp_path / "s.json")
    assert record.returncode == 0, record.stderr
    sent = {p.id: fetch_sent(cluster.root_url(p.id), cluster.control_headers) for p in PROFILES}
    assert all(sum(stream.tokens) == 48 for streams in sent.values() for stream in streams)
    truths = session_truth(archive.load(tmp_path / "s.json"), sent)
    errors = "\n".join(truth.line() for truth in truths)
    assert len(truths) == len(PROFILES) * 4, errors
    on_time = _held_to_what_was_sent(truths)
    # each arm has runs with a decode figure (a drafter's 10 ms answer may come in one read now and then)
    assert {t.arm for t in on_time if t.decode_error_pct is not None} == {p.id for p in PROFILES}, errors


def test_runs_in_flight_together_pair_by_their_response_ids(tmp_path: Path, make_sim) -> None:
    """Eight requests in flight at once: each run still finds its own stream, by id, with its
    times inside the writes' (unless the server's kernel sent them late, which the truth says);
    a stream with its id that began before it was sent is refused."""
    cluster = make_sim(PROFILES, time_scale=0.5)
    config = write_config(tmp_path / "c.toml", cluster, max_tokens=48)
    sweep = run_cli("sweep", "--config", config, "--concurrency", "8", "--requests", "24", "--out", tmp_path / "s.json")
    assert sweep.returncode == 0, sweep.stderr
    sent = {p.id: fetch_sent(cluster.root_url(p.id), cluster.control_headers) for p in PROFILES}
    session = archive.load(tmp_path / "s.json")
    truths = session_truth(session, sent)
    errors = "\n".join(truth.line() for truth in truths)
    assert len(truths) == len(session.runs) and sum(not run.warmup for run in session.runs) == len(PROFILES) * 24, errors
    _held_to_what_was_sent(truths)
    arm = PROFILES[0].id
    runs = [run for run in session.runs if run.arm == arm]
    assert _most_in_flight(runs) == 8
    pairs = pair(arm, runs, sent[arm])
    assert [run.response_id for run, _ in pairs] == [stream.response_id for _, stream in pairs]
    run, stream = pairs[-1]
    assert run.send_monotonic_ns is not None
    earlier = replace(stream, start_ns=run.send_monotonic_ns - 1)  # its id, sent before the run was
    with pytest.raises(ValueError, match=r": stream \S+ began -0\.000 ms after the run's send, not between it and"):
        pair(arm, [run], [earlier])


def _held_to_what_was_sent(truths: list[RunTruth]) -> list[RunTruth]:
    """The runs whose bytes left the server inside its writes (most of them), each within the
    truth's bounds; returned. A run the server's kernel sent late mixes that delay into its
    errors (truth.py), and one read whole (a starved client) has no decode figure."""
    errors = "\n".join(truth.line() for truth in truths)
    on_time = [t for t in truths if not t.sent_late]
    assert len(on_time) >= len(truths) / 2, errors
    assert all(t.first_shared or abs(t.ttft_error_ms) <= TTFT_MS for t in on_time), errors
    assert all(t.decode_error_pct is None or abs(t.decode_error_pct) <= DECODE_PCT for t in on_time), errors
    return on_time
