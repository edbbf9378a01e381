"""tokenreel against a real llama.cpp server: the pinned build, tiny generated models, real HTTP.

Every figure tokenreel records is checked against the engine's own view of the same request
(its logged `timings`) or its /metrics counters. Marked `engine`: `make test-fast` leaves them out.
The first run builds llama.cpp (~4-10 min on 2 cores) unless the cache already has it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.engines import build, models
from tests.engines.cli import record, tokenreel
from tests.engines.servers import EngineTiming, Server, ServerError, free_port, wait_metric
from tokenreel.analysis.answers import answer_of, build_answers
from tokenreel.analysis.metrics import run_metrics
from tokenreel.analysis.selection import DEFAULT_SELECTION
from tokenreel.recorder.client.request_body import completions_url, request_body
from tokenreel.report.data import build_report
from tokenreel.session import archive
from tokenreel.session.model import Arm, Prompt, Session

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[1]
# The decode check compares spans (first token to last): only the two end events' delivery can
# differ from the engine's clock, so a longer run dilutes that; 1024 tokens keeps it under 0.1%.
MAX_TOKENS = 1024
LADDER_WARMUP, LADDER_REPEATS = 1, 1
DECODE_TOLERANCE = 0.002  # 0.2 %
ACCEPTING = 2.0  # tokens a step: this drafter makes 7.3-7.5 (k = 8); one that disagrees with its target, near 1
PROMPTS = [
    {"id": "code-1", "category": "code",
     "messages": [{"role": "user", "content": "Write a Python function that merges overlapping intervals."}]},
    {"id": "prose-1", "category": "prose",
     "messages": [{"role": "user", "content": "Tell me a story about a lighthouse keeper and a storm."}]},
]
# The ladder's prompts per API mode: both in chat; one in completions, whose stream differs from
# chat's only in its field names, so every per-run check still meets it on three arms.
LADDER_PROMPTS = {"chat": PROMPTS, "completions": PROMPTS[:1]}


@pytest.fixture(scope="module")
def engine() -> models.Models:
    """The pinned engine and the models, built once and cached (make engine does it before pytest)."""
    try:
        build.build()
        return models.generate()
    except (build.BuildError, RuntimeError) as exc:
        pytest.fail(f"real-engine tests need the llama.cpp build: {exc}", pytrace=False)


def _start(tmp: Path, name: str, args: list[str], metrics: bool = True) -> Server:
    server = Server(name, args, free_port(), tmp / f"{name}.log", metrics=metrics)
    try:
        return server.start()
    except ServerError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="module")
def arms(engine: models.Models, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Server]]:
    """The ladder: f16 target, Q4_0 target, Q4_0 target + Q4_0 draft (draft-simple, 8 tokens)."""
    tmp = tmp_path_factory.mktemp("llamacpp")
    spec = ["-m", str(engine.q4_0), "-md", str(engine.draft), "--spec-type", "draft-simple", "--spec-draft-n-max", "8"]
    servers: dict[str, Server] = {}
    try:
        servers["f16"] = _start(tmp, "f16", ["-m", str(engine.f16)])
        servers["q4_0"] = _start(tmp, "q4_0", ["-m", str(engine.q4_0)])
        servers["q4_0-spec"] = _start(tmp, "q4_0-spec", spec)
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def write_config(tmp: Path, name: str, servers: dict[str, Server], api: str = "chat", warmup: int = 1,
                 repeats: int = 2, max_tokens: int = MAX_TOKENS, prompts: list[dict] | None = None,
                 prompt_cache: str = "fresh") -> Path:
    """A tokenreel config TOML for these servers (one [[arms]] per server, in order)."""
    suite = tmp / f"{name}.jsonl"
    suite.write_text("".join(json.dumps(p) + "\n" for p in (prompts or PROMPTS)))
    lines = [
        "[session]", f'name = "{name}"', f'prompts = "{suite.name}"', f"max_tokens = {max_tokens}",
        "ignore_eos = true", "temperature = 0", f'prompt_cache = "{prompt_cache}"', f"warmup = {warmup}", f"repeats = {repeats}",
        "idle_wait_s = 30", "",
    ]
    for arm_id, server in servers.items():
        lines += ["[[arms]]", f'id = "{arm_id}"', f'base_url = "{server.base_url}"', 'model = "tiny"',
                  f'api = "{api}"', ""]
    path = tmp / f"{name}.toml"
    path.write_text("\n".join(lines))
    return path




# --- the ladder, recorded once per API mode ---------------------------------------------------


@pytest.fixture(scope="module", params=["chat", "completions"])
def ladder(request: pytest.FixtureRequest, arms: dict[str, Server], tmp_path_factory: pytest.TempPathFactory):
    """(session, {arm: engine timings of its runs in order}, record's output), per API mode."""
    api = request.param
    tmp = tmp_path_factory.mktemp(f"ladder-{api}")
    offsets = {arm_id: server.log_offset() for arm_id, server in arms.items()}
    config = write_config(tmp, f"ladder-{api}", arms, api=api, warmup=LADDER_WARMUP, repeats=LADDER_REPEATS,
                          prompts=LADDER_PROMPTS[api])
    done, out = record(tmp, config)
    assert done.returncode == 0, f"record exited {done.returncode}: {done.stderr.strip()[-600:]}"
    timings = {arm_id: server.timings(offsets[arm_id]) for arm_id, server in arms.items()}
    return archive.load(out), timings, done


def window_slack(run) -> float:
    """How far a run's decode may part from the engine's beyond DECODE_TOLERANCE: none when its
    first read carried one token; when a starved recorder read its first k tokens at once (the
    kernel keeps the last packet's time), its window holds k - 1 fewer tokens than the engine's
    first-to-last, and a rate that varied on a loaded box may differ by that share of the run."""
    metrics = run_metrics(run)
    return (metrics.first_chunk_tokens - 1) / (metrics.output_tokens - 1)


def _pairs(session: Session, timings: dict[str, list[EngineTiming]]):
    """(run, the engine's timing of that same request): runs of an arm are sent one at a time, in order."""
    for arm in session.arms:
        runs = [r for r in session.runs if r.arm == arm.id]  # archive order = send order per arm
        logged = timings[arm.id]
        assert len(logged) == len(runs), f"{arm.id}: {len(runs)} runs recorded, the engine logged {len(logged)}"
        yield from zip(runs, logged, strict=False)


def test_ladder_runs_all_ok(ladder) -> None:
    session, _, done = ladder
    bad = [f"{r.arm}/{r.prompt}/{r.index}: {r.status} {r.error}" for r in session.runs if r.status != "ok"]
    assert not bad, bad
    assert len(session.prompts) == len(LADDER_PROMPTS[session.arms[0].api])
    assert len(session.runs) == 3 * len(session.prompts) * (LADDER_WARMUP + LADDER_REPEATS)
    assert all(r.gate.status == "idle" for r in session.runs)
    assert all(r.contended is False for r in session.runs), [r.contention_detail for r in session.runs if r.contended]


def test_token_counts_equal_engine_predicted_n(ladder) -> None:
    """n, and the per-event token column, both equal the engine's predicted_n for the request."""
    session, timings, _ = ladder
    wrong = []
    for run, engine_timing in _pairs(session, timings):
        n, summed = run_metrics(run).output_tokens, sum(run.chunks.tokens)
        if not (n == summed == engine_timing.predicted_n == MAX_TOKENS):
            wrong.append(f"{run.arm}/{run.prompt}/{run.index}: n={n} chunk sum={summed} "
                         f"engine predicted_n={engine_timing.predicted_n} ({run.token_source})")
    assert not wrong, "\n".join(wrong)


def test_decode_rate_matches_engine_per_run(ladder) -> None:
    """tokenreel's decode tok/s is within 0.2% of the engine's predicted_per_second, run by run
    (a run whose first read carried k tokens: within 0.2 % plus its window's k - 1 tokens' share:
    Q4_0 259.2 against 262.5 tok/s once, its first 31 tokens read at once on a box loaded beyond
    the suite's own workers).

    Both are (n - 1 first token) / (last token - first token): llama.cpp times from the first
    sampled token to the last, tokenreel from the first text event's arrival to the last's.
    Measured runs only, like every figure tokenreel reports: a prompt's first (warmup) request
    also processes the whole prompt, and on 2 busy cores its first event was seen up to ~4 ms
    late now and then (0.2-0.4% of a 512-token run, 0.1-0.2% of this one), which is what warmups are there to absorb.
    """
    session, timings, _ = ladder
    wrong = []
    for run, engine_timing in _pairs(session, timings):
        if run.warmup:
            continue
        ours = run_metrics(run).decode_tok_s
        theirs = engine_timing.predicted_per_second
        if ours is None or abs(ours / theirs - 1) > DECODE_TOLERANCE + window_slack(run):
            wrong.append(f"{run.arm}/{run.prompt}/{run.index}: tokenreel {ours} tok/s, engine {theirs} tok/s "
                         f"(first chunk {run_metrics(run).first_chunk_tokens} tokens, {run.token_source})")
    assert not wrong, "\n".join(wrong)


def test_archived_engine_figures_agree_with_ours(ladder) -> None:
    """Each run's archived `engine` is the engine's own figure for that request (its log, 2 decimals,
    the pinned build's predicted_per_second being (predicted_n - 1) / predicted_ms), and the
    report's engine_agreement holds tokenreel's decode within the decode test's tolerance of it:
    the issue's GPU target is median <= 0.05 %, worst <= 0.2 %; these 2 busy cores get the worst bound
    for both. Every run was a fresh prefill (tokenreel's default): no cached prompt tokens."""
    session, timings, _ = ladder
    wrong = []
    for run, engine_timing in _pairs(session, timings):
        figures = run.engine
        if figures is None or figures.source != "llama.cpp timings" or figures.decode_tok_s is None:
            wrong.append(f"{run.arm}/{run.prompt}/{run.index}: engine figures {figures}")
        elif abs(figures.decode_tok_s - engine_timing.predicted_per_second) > 0.01 + 1e-4 * figures.decode_tok_s:
            wrong.append(
                f"{run.arm}/{run.prompt}/{run.index}: archived {figures.decode_tok_s}, logged {engine_timing.predicted_per_second}"
            )
        elif figures.cached_prompt_tokens != 0 or not figures.prompt_tokens:
            wrong.append(f"{run.arm}/{run.prompt}/{run.index}: prompt {figures.prompt_tokens}, cached {figures.cached_prompt_tokens}")
    assert not wrong, "\n".join(wrong)
    agreement = build_report(session)["engine_agreement"]
    assert [row["runs"] for row in agreement] == [len(session.prompts) * LADDER_REPEATS] * 3, agreement
    for row in agreement:
        counted = [r for r in session.runs if r.arm == row["arm"] and DEFAULT_SELECTION.counts(r)]
        bound = 100 * (DECODE_TOLERANCE + max(map(window_slack, counted)))
        assert row["median_pct"] <= bound and row["worst_pct"] <= bound, (row, bound)


def test_drafter_observed_while_props_says_none_and_the_build_said_as_it_is(ladder) -> None:
    """The drafter arm's /props does not name its drafter (`speculative.types: "none"` for -md with
    draft-simple); the report names it as observed in the stream. A build without its number and
    commit is said as unknown, never as "b0-unknown"."""
    session, _, _ = ladder
    props = session.arm("q4_0-spec").fingerprint["props"]
    fingerprints = {a["arm"]: a["fingerprint"] for a in build_report(session)["arms"]}
    assert fingerprints["q4_0-spec"]["speculative"].startswith("drafter observed in the stream"), (fingerprints, props)
    assert "observed" not in fingerprints["q4_0"].get("speculative", ""), fingerprints["q4_0"]
    build_info = props.get("build_info", "")
    version = fingerprints["q4_0"]["version"]
    assert not version.startswith("b0-") and (version == build_info or version.startswith("unknown")), (version, build_info)


def test_the_drafter_drafts_for_its_target_and_each_step_is_the_engines(ladder) -> None:
    """The drafter agrees with its target, and every ladder step tokenreel reports is the engine's
    own ratio: the same mean of per-prompt medians, taken of the engine's logged
    predicted_per_second for the runs the report counted, agrees within twice the per-run tolerance.

    Agreement is held by acceptance, the engine's own count (ACCEPTING): a drafter that disagrees
    with the target gets hardly a draft accepted (that arm once ran at 0.76x of Q4_0). Not by
    speed: 1.3-1.5x on a quiet machine, but with the suite's other workers on the 2 cores the
    drafter (9 llama_decode calls a step) slows most, and 0.97x was seen in CI with the engine's
    own figures agreeing. Speed-ups are the benches' business, not a test's.
    Quantization is held to the engine's ratio, not to a speed-up: on this x86-64-v3 build (F16C,
    AVX-512) the tiny model's f16 and Q4_0 matmuls run alike on 2 cores (74.14 vs 73.75 tok/s in CI).
    """
    session, timings, _ = ladder
    per_prompt: dict[tuple[str, str], list[float]] = {}
    for run, engine_timing in _pairs(session, timings):
        if DEFAULT_SELECTION.counts(run):
            per_prompt.setdefault((run.arm, run.prompt), []).append(engine_timing.predicted_per_second)
    engine = {arm.id: statistics.fmean(statistics.median(rates) for (a, _), rates in per_prompt.items() if a == arm.id)
              for arm in session.arms}
    ours = {row["arm"]: row["vs_prior"] for row in build_report(session)["ladder"]}
    steps = {"q4_0": engine["q4_0"] / engine["f16"], "q4_0-spec": engine["q4_0-spec"] / engine["q4_0"]}
    lengths = [t.mean_len for run, t in _pairs(session, timings) if run.arm == "q4_0-spec" and DEFAULT_SELECTION.counts(run)]
    assert lengths and statistics.fmean(lengths) >= ACCEPTING, lengths
    slack = {arm.id: max(window_slack(r) for r in session.runs if r.arm == arm.id and DEFAULT_SELECTION.counts(r))
             for arm in session.arms}
    bounds = {"q4_0": 2 * DECODE_TOLERANCE + slack["f16"] + slack["q4_0"],
              "q4_0-spec": 2 * DECODE_TOLERANCE + slack["q4_0"] + slack["q4_0-spec"]}
    assert all(abs(ours[arm] / step - 1) <= bounds[arm] for arm, step in steps.items()), (ours, steps, bounds)


def test_spec_runs_carry_acceptance(ladder) -> None:
    """Each drafter run's acceptance length is the engine's own for that request (its log, 2 decimals)."""
    session, timings, _ = ladder
    for run, engine_timing in _pairs(session, timings):
        if run.arm != "q4_0-spec":
            assert run.acceptance is None or run.acceptance.mean_length is None
            continue
        assert run.acceptance is not None and run.acceptance.mean_length is not None, \
            f"{run.prompt}/{run.index}: no acceptance length (acceptance={run.acceptance})"
        assert run.acceptance.accepted == engine_timing.draft_n_accepted, (run.acceptance, engine_timing)
        assert round(run.acceptance.mean_length, 2) == engine_timing.mean_len, (run.acceptance, engine_timing)


def test_report_of_real_ladder(ladder, tmp_path: Path) -> None:
    """`tokenreel report` of the real ladder: arms in order, the drafter's acceptance shown (a drafter
    that agrees with its target: speed-ups on 2 shared cores are the benches' business)."""
    session, _, _ = ladder
    path = tmp_path / "s.json"
    archive.save(session, path)
    done = tokenreel("report", str(path), "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ladder_rows = {row["arm"]: row for row in json.loads(done.stdout)["ladder"]}
    assert list(ladder_rows) == ["f16", "q4_0", "q4_0-spec"]
    assert ladder_rows["q4_0-spec"]["vs_prior"] > 0, ladder_rows
    assert ladder_rows["q4_0-spec"]["acceptance_length"] >= ACCEPTING, ladder_rows["q4_0-spec"]


def _engine_text(session: Session, arm: Arm, prompt: Prompt) -> str:
    """The engine's own answer to the request tokenreel streamed, asked for again without streaming."""
    body = request_body(arm, prompt, session.settings)
    body.update(stream=False)
    body.pop("stream_options")
    request = urllib.request.Request(completions_url(arm), json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        choice = json.load(response)["choices"][0]
    return choice["message"]["content"] if arm.api == "chat" else choice["text"]


def test_same_answers_agree_with_the_engines_own_texts(ladder) -> None:
    """The same-answers check on a real ladder, against each engine's non-streamed answer.

    At temperature 0 each arm answers the same request the same way, so its non-streamed text is
    what the streamed run showed; two arms are "identical" exactly when those texts are equal, and
    where they differ the common prefix is the texts' own. Quantization (f16 vs Q4_0) may or may
    not change the answer of these tiny models (here it does, within a few tokens): the check must
    say which, not assume it. The drafter must not: llama.cpp keeps the target's greedy tokens, so
    Q4_0 + draft answers exactly as Q4_0 does (seen on every run here, chat and completions).
    Nothing here is timed, so the three servers are asked at once, each one prompt at a time (two
    requests batched on one f16 server can change its greedy answer).
    """
    session, _, _ = ladder
    answers = build_answers(session)
    reference = session.arms[0]
    wrong = []
    def ask_arm(arm: Arm) -> dict[tuple[str, str], str]:
        return {(arm.id, prompt.id): _engine_text(session, arm, prompt) for prompt in session.prompts}

    with ThreadPoolExecutor(len(session.arms)) as pool:
        engine_texts = {key: text for texts in pool.map(ask_arm, session.arms) for key, text in texts.items()}
    for prompt in session.prompts:
        texts = {arm.id: engine_texts[arm.id, prompt.id] for arm in session.arms}
        for arm in session.arms:
            run = next(r for r in session.runs if r.arm == arm.id and r.prompt == prompt.id and not r.warmup)
            if answer_of(run).text != texts[arm.id]:
                wrong.append(f"{arm.id}/{prompt.id}: the archived text is not the engine's answer")
        verdicts = {a.arm: a for p in answers.prompts if p.prompt == prompt.id for a in p.arms}
        for arm in session.arms[1:]:
            verdict = verdicts[arm.id]  # against the arm it is held to: the first, or (the drafter) its target
            assert verdict.reference == ("q4_0" if arm.id == "q4_0-spec" else reference.id), verdict
            ref_text, text = texts[verdict.reference], texts[arm.id]
            same_prefix = len(os.path.commonprefix([ref_text, text]))
            if verdict.identical != (ref_text == text) or verdict.common_prefix_chars != same_prefix:
                wrong.append(f"{arm.id}/{prompt.id}: identical={verdict.identical}, prefix {verdict.common_prefix_chars} "
                             f"chars; the engines' texts: equal={ref_text == text}, prefix {same_prefix} chars")
        if texts["q4_0-spec"] != texts["q4_0"]:
            wrong.append(f"{prompt.id}: the drafter changed Q4_0's answer (greedy verification should keep it)")
    assert not wrong, "\n".join(wrong)
    assert not answers.nondeterministic, answers.nondeterministic


# --- the prompt cache: the engine's default against tokenreel's fresh prefill ----------------------


def test_cache_hit_flagged_with_the_engines_default_cache_not_with_a_fresh_prefill(arms: dict[str, Server], tmp_path: Path) -> None:
    """llama.cpp's default reuses a repeated prompt's KV state (cache_n = all but its last token):
    recorded with `prompt_cache = "engine"` the repeat's TTFT includes a cache hit and the report
    counts it; tokenreel's default sends cache_prompt false and no run hits the cache."""
    server = arms["q4_0"]
    found = {}
    for policy in ("engine", "fresh"):
        config = write_config(tmp_path, f"cache-{policy}", {"q4_0": server}, warmup=1, repeats=1, max_tokens=16,
                              prompts=PROMPTS[:1], prompt_cache=policy)
        done, out = record(tmp_path, config)
        assert done.returncode == 0, done.stderr.strip()[-600:]
        session = archive.load(out)
        found[policy] = ([(r.warmup, r.engine.cached_prompt_tokens if r.engine else None) for r in session.runs],
                         build_report(session)["prompt_cache"]["arms"][0]["cache_hits"])
    engine_runs, engine_hits = found["engine"]
    assert engine_runs[1][1] and engine_runs[1][1] > 0 and engine_hits == 1, found
    assert found["fresh"] == ([(True, 0), (False, 0)], 0), found


# --- acceptance length against the counters ----------------------------------------------------


def test_acceptance_length_equals_counter_deltas(arms: dict[str, Server], tmp_path: Path) -> None:
    """One drafter run alone: tokenreel's acceptance length is 1 + Δaccepted / Δdrafts of /metrics."""
    server = arms["q4_0-spec"]
    names = ("spec_decode_num_drafts_total", "spec_decode_num_accepted_tokens_total")
    before = {k: server.metric(k) for k in names}
    config = write_config(tmp_path, "accept", {"spec": server}, warmup=0, repeats=1, max_tokens=256, prompts=PROMPTS[:1])
    done, out = record(tmp_path, config)
    assert done.returncode == 0, done.stderr.strip()[-600:]
    drafts, accepted = (server.metric(k) - before[k] for k in names)
    [run] = archive.load(out).runs
    assert drafts > 0 and run.acceptance is not None, f"Δdrafts={drafts}, acceptance={run.acceptance}"
    assert run.acceptance.mean_length == pytest.approx(1 + accepted / drafts, rel=1e-9), (
        f"tokenreel {run.acceptance.mean_length} ({run.acceptance.source}); counters: 1 + {accepted:g} / {drafts:g}")


# --- contention: a second client overlapping a run ---------------------------------------------


def test_overlapping_client_makes_run_contended(arms: dict[str, Server], tmp_path: Path) -> None:
    """-np 2: another request starts during the run and ends after it (three times its length,
    both decoded in the same steps); the run must be flagged."""
    server = arms["f16"]
    config = write_config(tmp_path, "contended", {"f16": server}, warmup=0, repeats=1, max_tokens=256)
    result: dict[str, subprocess.CompletedProcess[str]] = {}
    recorder = threading.Thread(target=lambda: result.setdefault("done", tokenreel(
        "record", "--config", str(config), "--out", str(tmp_path / "c.json"), cwd=tmp_path)))
    recorder.start()
    wait_metric(server, "requests_processing", lambda v: v >= 1)  # tokenreel's first run is decoding
    body = json.dumps({"prompt": "other traffic", "max_tokens": 768, "ignore_eos": True, "temperature": 0}).encode()
    other = threading.Thread(target=lambda: urllib.request.urlopen(
        urllib.request.Request(f"{server.base_url}/completions", body), timeout=120).read())
    other.start()
    recorder.join(timeout=240)
    other.join(timeout=120)
    done = result["done"]
    runs = archive.load(tmp_path / "c.json").runs
    first = runs[0]
    assert first.status == "ok", first.error
    assert first.contended is True, (
        f"run overlapped by another client was contended={first.contended} ({first.contention_detail!r}); "
        f"record said: {done.stderr.strip()[-300:]}")


# --- no /metrics -------------------------------------------------------------------------------


def test_server_without_metrics_gate_unavailable_with_warning(engine: models.Models, tmp_path: Path) -> None:
    server = _start(tmp_path, "nometrics", ["-m", str(engine.q4_0)], metrics=False)
    try:
        config = write_config(tmp_path, "nometrics", {"plain": server}, warmup=0, repeats=1, max_tokens=64)
        done, out = record(tmp_path, config)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr.strip()[-600:]
    runs = archive.load(out).runs
    assert [r.status for r in runs] == ["ok"] * len(PROMPTS)
    assert {r.gate.status for r in runs} == {"unavailable"}
    assert all(r.contended is None for r in runs)
    warnings = [line for line in done.stderr.splitlines() if "warning" in line.lower() and "/metrics" in line]
    assert warnings, f"no warning about the missing /metrics in: {done.stderr!r}"


# --- a server killed mid-run, then --resume ----------------------------------------------------


KILLED_TOKENS = 384


def test_killed_server_fails_run_then_resume_completes(engine: models.Models, tmp_path: Path) -> None:
    server = _start(tmp_path, "victim", ["-m", str(engine.f16)])
    try:
        # ~5 s a run: still decoding when it is killed half a second in, even on busy cores
        config = write_config(tmp_path, "killed", {"victim": server}, warmup=0, repeats=1, max_tokens=KILLED_TOKENS)
        out = tmp_path / "k.json"
        holder: dict[str, subprocess.CompletedProcess[str]] = {}
        recorder = threading.Thread(target=lambda: holder.setdefault("done", tokenreel(
            "record", "--config", str(config), "--out", str(out), cwd=tmp_path)))
        recorder.start()
        wait_metric(server, "requests_processing", lambda v: v >= 1)
        time.sleep(0.5)  # well into decoding: tokens have streamed
        server.kill()
        recorder.join(timeout=240)
        done = holder["done"]
        assert done.returncode == 1, f"exit {done.returncode}: {done.stderr.strip()[-400:]}"
        runs = archive.load(out).runs
        failed = [r for r in runs if r.status == "failed"]
        assert failed and failed[0].prompt == "code-1", [(r.prompt, r.status) for r in runs]
        error = failed[0].error
        assert error and "\n" not in error, repr(error)
        assert len(failed[0].chunks) > 0  # the tokens streamed before the kill are kept
        said = [line for line in done.stderr.splitlines() + done.stdout.splitlines() if error[:40] in line]
        assert said, f"the failure was not printed as a line: {done.stderr!r}"
        server.start()  # same port, same flags: the endpoint is back
        again = tokenreel("record", "--config", str(config), "--out", str(out), "--resume", cwd=tmp_path)
        assert again.returncode == 0, again.stderr.strip()[-600:]
        resumed = archive.load(out).runs
        assert [r.status for r in resumed] == ["ok"] * len(PROMPTS)
        assert all(run_metrics(r).output_tokens == KILLED_TOKENS for r in resumed)
    finally:
        server.stop()
