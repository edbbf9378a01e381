"""Replicas (issue 28, item 1): one ladder recorded on several endpoints per arm at once.

Two (or three) sets of simulated endpoints over real loopback HTTP, each a replica serving every
arm. Checked: the shards (stratified, fixed, disjoint, covering the suite), every run archived
with its replica and on that replica's endpoint (the simulator's own log), arms never
overlapping on one replica while replicas overlap in time, the pooled ladder agreeing with a
one-replica recording of the same prompts, per-replica figures in the report, a replica that
fails going on alone, --resume, and the config's errors.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import httpx
import orjson
import pytest

from tests.test_cli import FAST_TIMEOUTS, invoke, run_cli
from tests.test_sim_sent import _held_to_what_was_sent
from tokenreel.recorder.replicas import rotated, shards
from tokenreel.session import archive
from tokenreel.session.model import Prompt, Session
from tokenreel.simulator.profiles import SEED_LADDER
from tokenreel.simulator.server import SimCluster
from tokenreel.simulator.truth import fetch_sent, pair, run_truth

PROFILES = SEED_LADDER[:2]
# Real speed for the tests that hold the pooled ratio to the truth: a bf16 step lasts 10 ms, long
# beside the stalls of a simulator sharing this process (and the box) with two replicas' streams;
# at 0.25 (2.6 ms steps) a loaded CI box once moved the pooled ratio 28 %. QUICK_SCALE for the
# tests whose runs only need to exist.
SCALE = 1.0
QUICK_SCALE = 0.25


def _suite(folder: Path) -> str:
    """12 prompts in 2 categories: 3 per category on each of 2 replicas, enough for replica strata."""
    rows = [{"id": f"{c}-{i}", "category": c, "messages": [{"role": "user", "content": f"{c} question {i}"}]}
            for c in ("code", "conversation") for i in range(6)]
    path = folder / "suite.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(row) for row in rows) + b"\n")
    return str(path)


def _config(path: Path, clusters: list[SimCluster], prompts: str | None = None, repeats: int = 3,
            urls: dict[str, list[str]] | None = None) -> Path:
    prompts = prompts or _suite(path.parent)
    # 64 tokens and the median of 3 runs: the in-process simulator, sharing the GIL with two
    # replicas' streams, now and then sends a first token late and catches up, which inflates one
    # run's decode rate; a median cell leaves one such run out (on GPUs each replica is its own host)
    lines = ["[session]", 'name = "replicas"', f'prompts = "{prompts}"', "max_tokens = 64", "warmup = 0",
             f"repeats = {repeats}", "idle_wait_s = 0.5", "host_wait_s = 0", "[session.timeouts]",
             *(f"{k} = {v}" for k, v in FAST_TIMEOUTS.items())]
    for profile in PROFILES:
        bases = (urls or {}).get(profile.id) or [c.base_url(profile.id) for c in clusters]
        lines += ["[[arms]]", f'id = "{profile.id}"', f'label = "{profile.label}"',
                  f"base_urls = {orjson.dumps(bases).decode()}", f'model = "{profile.model}"']
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _sent(cluster: SimCluster, profile_id: str) -> list[dict]:
    url = cluster.root_url(profile_id) + "/sim/sent"
    return httpx.get(url, headers={"X-Sim-Token": cluster.token}).json()["requests"]


def test_shards_are_stratified_fixed_and_cover_the_suite() -> None:
    prompts = [Prompt(id=f"{c}-{i}", category=c, messages=[], prompt="x") for c in ("a", "b", "c") for i in range(5)]
    for count in (1, 2, 3, 4):
        parts = shards(prompts, count)
        assert parts == shards(prompts, count)  # fixed: --resume shards alike
        assert sorted(p for part in parts for p in part) == sorted(p.id for p in prompts)
        sizes = [len(part) for part in parts]
        assert max(sizes) - min(sizes) <= 1, (count, sizes)
        for category in ("a", "b", "c"):
            per = [sum(1 for p in part if p.startswith(category)) for part in parts]
            assert max(per) - min(per) <= 1, (count, category, per)
    assert [a for a in rotated(["x", "y", "z"], 1)] == ["y", "z", "x"]  # type: ignore[list-item]


def test_two_replicas_record_the_ladder_at_once(tmp_path: Path, make_sim) -> None:
    clusters = [make_sim(PROFILES, time_scale=SCALE) for _ in range(2)]
    out = tmp_path / "two.json"
    # the recorder in a process of its own, as a user's: the two simulators already share this one's lock
    result = run_cli("record", "--config", _config(tmp_path / "c.toml", clusters), "--out", out, "--no-preflight")
    assert result.returncode == 0, result.stderr
    session = archive.load(out)
    parts = shards(session.prompts, 2)
    assert all(arm.base_urls == [c.base_url(arm.id) for c in clusters] for arm in session.arms)
    assert len(session.runs) == 2 * len(session.prompts) * 3 and all(r.status == "ok" for r in session.runs)
    for run in session.runs:
        assert run.replica is not None and run.prompt in parts[run.replica], (run.prompt, run.replica)
    # each replica's endpoints served exactly its shard's runs (the simulator's own log)
    for replica, cluster in enumerate(clusters):
        for profile in PROFILES:
            assert len(_sent(cluster, profile.id)) == 3 * len(parts[replica]), (replica, profile.id)
    # arms never overlap on a replica; the replicas overlap in time, replica 1 starting with arm 2
    spans = {}
    for replica in (0, 1):
        for arm in session.arms:
            runs = [r for r in session.runs if r.arm == arm.id and r.replica == replica]
            spans[(replica, arm.id)] = (min(r.send_monotonic_ns for r in runs), max(r.send_monotonic_ns + r.chunks.t_ns[-1] for r in runs))
        (a0, a1), (b0, b1) = (spans[(replica, arm.id)] for arm in session.arms)
        assert a1 <= b0 or b1 <= a0, replica
    first, second = (arm.id for arm in session.arms)
    assert spans[(0, first)][0] < spans[(0, second)][0] and spans[(1, second)][0] < spans[(1, first)][0]
    assert spans[(0, first)][0] < spans[(1, second)][1] and spans[(1, second)][0] < spans[(0, first)][1]
    report = orjson.loads(invoke("report", out, "--format", "json").output)
    assert [e["replica"] for e in report["replicas"]] == [0, 1]
    assert [e["prompts"] for e in report["replicas"]] == [len(p) for p in parts]
    assert all(e["runs"] == {"ok": 2 * 3 * len(p)} for e, p in zip(report["replicas"], parts, strict=False))
    assert all(e["ladder"][1]["vs_first_ci95"] for e in report["replicas"])  # 3 per category each: intervals
    assert all(e["served_models"] == sorted({p.model for p in PROFILES}) for e in report["replicas"]), report["replicas"]
    assert report["replica_warnings"] == []
    md = invoke("report", out).output
    assert "## Replicas" in md and md.count("\n| 0 | ") == 1 and md.count("\n| 1 | ") == 1, md[-1200:]
    assert_pooled_is_the_truth(report, session, clusters)


def assert_pooled_is_the_truth(report: dict, session: Session, clusters: list[SimCluster]) -> None:
    """The pooled ladder (report json) agrees with the simulator's truth, the profiles' own decode
    rates (a plain arm decodes at its profile's rate, whatever the prompt: the archived demo's
    NVFP4 / bf16 is 1.40797 against 1.40783), over the prompts whose every run the simulator sent
    at that rate; when it sent them all so, the ladder's own figure and interval hold it. A
    simulator starved by a loaded box (it serves from this process) falls behind and sends the rest
    of a reply in a burst (a CI run's suite start: 3 of 12 prompts, a cell's median 65 times the
    rate): the recorder then measures what was sent, checked run by run against the simulator's log."""
    behind = _sent_behind_schedule(session, clusters)
    cells = {(cell["arm"], cell["prompt"]): cell["decode_tok_s"] for cell in report["cells"]}
    kept = [p.id for p in session.prompts if p.id not in behind]
    assert len(kept) >= len(session.prompts) / 2, sorted(behind)
    truth = PROFILES[1].decode_tok_s / PROFILES[0].decode_tok_s
    first, second = (statistics.fmean(cells[(profile.id, prompt)] for prompt in kept) for profile in PROFILES)
    assert second / first == pytest.approx(truth, rel=0.03), (second / first, truth, sorted(behind))
    if not behind:
        pooled = report["ladder"][1]["vs_first"]
        assert pooled == pytest.approx(truth, rel=0.03), (pooled, truth)
        low, high = report["ladder"][1]["vs_first_ci95"]
        assert low <= truth * 1.03 and truth / 1.03 <= high


def _sent_behind_schedule(session: Session, clusters: list[SimCluster]) -> set[str]:
    """The prompts with a run that replica's simulator did not send at its profile's rate (within
    1 %, from its own log of every write); on the way, every run's recorded times are held to
    that log (tests/test_sim_sent.py)."""
    behind, truths = set(), []
    for replica, cluster in enumerate(clusters):
        runs = [run for run in session.runs if run.replica == replica]
        for profile in PROFILES:
            for run, stream in pair(profile.id, runs, fetch_sent(cluster.root_url(profile.id), cluster.control_headers)):
                truths.append(run_truth(run, stream))
                # each write's bytes left during its call, [before, after] (the writing thread can wait
                # there for the other simulator's lock): the profile's span must fit between the
                # first and last token writes' windows, within 1 %
                writes = [j for j, tokens in enumerate(stream.tokens) if tokens > 0]
                f, e = writes[0], writes[-1]
                nominal_ns = sum(stream.tokens[f + 1:]) / profile.decode_tok_s * cluster.time_scale * 1e9
                shortest, longest = stream.before_ns[e] - stream.after_ns[f], stream.after_ns[e] - stream.before_ns[f]
                if shortest > nominal_ns * 1.01 or longest < nominal_ns * 0.99:
                    behind.add(run.prompt)
    _held_to_what_was_sent(truths)
    return behind


def test_a_failing_replica_goes_on_alone_and_resume_finishes_it(tmp_path: Path, make_sim) -> None:
    clusters = [make_sim(PROFILES, time_scale=QUICK_SCALE) for _ in range(2)]
    dead = "http://127.0.0.1:9/v1"  # discard port: nothing listens
    urls = {p.id: [clusters[0].base_url(p.id), dead] for p in PROFILES}
    out = tmp_path / "s.json"
    config = _config(tmp_path / "c.toml", clusters, prompts="builtin:ladder4", repeats=1, urls=urls)
    result = invoke("record", "--config", config, "--out", out, "--no-preflight")
    assert result.exit_code != 0
    assert "replica 1" in result.output, result.output
    session = archive.load(out)
    parts = shards(session.prompts, 2)
    ok = {(r.arm, r.prompt) for r in session.runs if r.status == "ok"}
    assert ok == {(a.id, p) for a in session.arms for p in parts[0]}
    assert all(r.status == "failed" for r in session.runs if r.replica == 1)
    report = orjson.loads(invoke("report", out, "--format", "json").output)
    assert report["replicas"][1]["runs"] == {"failed": 2 * len(parts[1])} and report["replicas"][1]["prompts"] == 0
    # the replica is back: --resume records its shard there, and only that
    fixed = _config(tmp_path / "c.toml", clusters, prompts="builtin:ladder4", repeats=1)
    resumed = invoke("record", "--config", fixed, "--out", out, "--resume", "--no-preflight", "--force-config")
    assert resumed.exit_code == 0, resumed.output
    session = archive.load(out)
    assert all(r.status == "ok" for r in session.runs) and len(session.runs) == 2 * len(session.prompts)
    assert {r.prompt for r in session.runs if r.replica == 1} == set(parts[1])


@pytest.mark.parametrize(("arms_toml", "said"), [
    ('base_url = "http://127.0.0.1:1/v1"\nbase_urls = ["http://127.0.0.1:2/v1"]', "arms[0].base_url: give base_urls"),
    ('base_urls = []', "arms[0].base_urls: must be a non-empty list"),
    ('base_urls = ["http://127.0.0.1:2/v1", "http://127.0.0.1:2/v1"]', "lists one URL twice"),
    ('base_urls = ["http://127.0.0.1:2/v1"]\nmetrics_urls = []', "arms[0].metrics_urls: must list one URL per base_urls entry (1)"),
    ('base_url = "http://127.0.0.1:2/v1"\nmetrics_urls = ["http://127.0.0.1:2/metrics"]', "goes with base_urls"),
])
def test_config_errors_name_the_field(tmp_path: Path, arms_toml: str, said: str) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f'[session]\nprompts = "builtin:ladder4"\n[[arms]]\nid = "a"\nmodel = "m"\n{arms_toml}\n', encoding="utf-8")
    result = invoke("record", "--config", config, "--out", tmp_path / "s.json", "--no-preflight")
    assert result.exit_code == 2 and said in result.output and len(result.output.strip().splitlines()) == 1, result.output


def test_replica_counts_must_agree_and_target_ci_and_sweep_refuse_them(tmp_path: Path) -> None:
    two = 'base_urls = ["http://127.0.0.1:2/v1", "http://127.0.0.1:3/v1"]'
    config = tmp_path / "c.toml"
    config.write_text(f'[session]\nprompts = "builtin:ladder4"\n[[arms]]\nid = "a"\nmodel = "m"\n{two}\n'
                      '[[arms]]\nid = "b"\nmodel = "m"\nbase_url = "http://127.0.0.1:4/v1"\n', encoding="utf-8")
    result = invoke("record", "--config", config, "--out", tmp_path / "s.json", "--no-preflight")
    assert result.exit_code == 2 and "same number of replicas (base_urls), got a 2, b 1" in result.output, result.output
    config.write_text(f'[session]\nprompts = "builtin:ladder4"\n[[arms]]\nid = "a"\nmodel = "m"\n{two}\n', encoding="utf-8")
    target = invoke("record", "--config", config, "--out", tmp_path / "t.json", "--no-preflight", "--target-ci", "5%")
    assert target.exit_code == 2 and "--target-ci" in target.output and "replicas" in target.output, target.output
    sweep = invoke("sweep", "--config", config, "--concurrency", "1,2", "--out", tmp_path / "w.json")
    assert sweep.exit_code == 2 and "a sweep loads one endpoint per arm" in sweep.output, sweep.output


def test_a_replica_that_serves_otherwise_is_refused_at_the_check(tmp_path: Path, make_sim) -> None:
    """Replica 1 runs another engine (another version) for the same model: pooled with replica 0's
    runs it would mix two servings in one cell, so the preflight names it and what differs, exit 2."""
    from dataclasses import replace

    profile = PROFILES[1]
    same, other = make_sim([profile], time_scale=QUICK_SCALE), make_sim([replace(profile, engine="llamacpp")], time_scale=QUICK_SCALE)
    bases = [same.base_url(profile.id), other.base_url(profile.id)]
    config = tmp_path / "c.toml"
    config.write_text("\n".join(["[session]", 'name = "r"', 'prompts = "builtin:ladder4"', "max_tokens = 16", "[[arms]]",
                                 'id = "q"', f"base_urls = {orjson.dumps(bases).decode()}", f'model = "{profile.model}"']) + "\n")
    result = invoke("record", "--config", config, "--out", tmp_path / "s.json", "--check")
    assert result.exit_code == 2, result.output
    [line] = [line for line in result.output.splitlines() if "replica 1:" in line]
    assert "serves otherwise than replica 0 (engine llamacpp against vllm;" in line and "version" in line, line
    assert "replica 0:" in result.output and "ok: q replica 0" in result.output


def test_a_replica_whose_stream_names_another_model_is_said_and_fails_the_recording(tmp_path: Path, make_sim) -> None:
    """llama.cpp serves whatever it loaded under any requested name and names its own model in the
    stream: replica 1 loaded another one. With the check skipped, each run keeps the model its
    response named; record says the arm pooled two models and exits 1; the report says it too."""
    from dataclasses import replace

    profile, second = (replace(p, engine="llamacpp") for p in PROFILES)
    clusters = [make_sim([profile, second], time_scale=QUICK_SCALE),
                make_sim([replace(profile, model="another-model"), second], time_scale=QUICK_SCALE)]
    out = tmp_path / "s.json"
    result = invoke("record", "--config", _config(tmp_path / "c.toml", clusters, repeats=1), "--out", out, "--no-preflight")
    assert result.exit_code == 1, result.output
    line = f"{profile.id}: its replicas' responses name 2 models ({profile.model!r} by replica 0; 'another-model' by replica 1)"
    assert line in result.output, result.output
    session = archive.load(out)
    assert {(r.replica, r.served_model) for r in session.runs if r.arm == profile.id} == {(0, profile.model), (1, "another-model")}
    assert {r.served_model for r in session.runs if r.arm == second.id} == {second.model}
    report = orjson.loads(invoke("report", out, "--format", "json").output)
    assert [e["served_models"] for e in report["replicas"]] == [sorted({profile.model, second.model}),
                                                                sorted({"another-model", second.model})]
    assert [line in warning for warning in report["replica_warnings"]] == [True]
    assert "**Replicas disagree**: " + line in invoke("report", out).output
