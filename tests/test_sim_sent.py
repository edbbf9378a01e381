"""The simulator's log of what it sent (GET /sim/sent), for every engine shape: `tokenreel
record` runs against it in its own process, and simulator/truth.py pairs each run with the
stream it was sent, token counts and all, and finds the recorded times inside the writes'."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tokenreel import archive
from tokenreel.simulator.profiles import ENGINES, SEED_LADDER
from tokenreel.simulator.truth import fetch_sent, session_truth
from tests.test_busy_host import DECODE_PCT, TTFT_MS
from tests.test_cli import run_cli, write_config

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
    assert all(t.first_shared or abs(t.ttft_error_ms) <= TTFT_MS for t in truths), errors
    assert all(t.decode_error_pct is not None and abs(t.decode_error_pct) <= DECODE_PCT for t in truths), errors
