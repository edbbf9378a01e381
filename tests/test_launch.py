"""Arms that start their own engine (issue 29, item 1), with real processes on loopback.

The fast tests launch the simulator (`tokenreel simulate`) through `launch`; the tests marked
`engine` launch the cached llama.cpp build (tests/engines/) the same way: no server is started
by a test itself. Lifetimes are read back from the archive (each arm's recording entry keeps
its engine's pid and its start and exit times) and checked against the process table.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from tests.test_recorder_support import finish
from tokenreel.recorder.config import ConfigError, launch_of, load_config
from tokenreel.recorder.engines.fingerprint import scrubbed_argv
from tokenreel.session import archive
from tokenreel.session.model import ArchiveError, Session
from tokenreel.simulator.profiles import profile_by_id

REPO = Path(__file__).resolve().parents[1]
SIM = [sys.executable, "-m", "tokenreel", "simulate", "--profiles", "bf16", "--port", "{port}", "--time-scale", "0.02"]
SIM_MODEL = profile_by_id("bf16").model
EXITS_AT_ONCE = [sys.executable, "-c", "import sys; print('no model here'); sys.exit(3)"]
NEVER_ANSWERS = [sys.executable, "-c", "import time; print('loading forever', flush=True); time.sleep(1000)"]
PROMPTS = [
    {"id": "code-1", "category": "code",
     "messages": [{"role": "user", "content": "Write a Python function that merges overlapping intervals."}]},
]
# Bounds for hangs, never speed targets: this machine is shared.
RECORD_TIMEOUT_S = 300


def toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(item) for item in items) + "]"


def write_config(tmp: Path, arms: list[dict], *, max_tokens: int = 16, warmup: int = 0, repeats: int = 1,
                 prompts: list[dict] | None = None, idle_wait_s: float = 5, host_wait_s: float = 0) -> Path:
    """A config whose arms are dicts of arm keys (lists become TOML arrays); by default no host
    reading before each run (these tests are not about the host, and their runs are shorter)."""
    suite = tmp / "suite.jsonl"
    suite.write_text("".join(json.dumps(p) + "\n" for p in (prompts or PROMPTS)))
    lines = ["[session]", 'name = "launch"', f'prompts = "{suite.name}"', f"max_tokens = {max_tokens}",
             f"warmup = {warmup}", f"repeats = {repeats}", f"idle_wait_s = {idle_wait_s}",
             f"host_wait_s = {host_wait_s}", ""]
    for arm in arms:
        lines.append("[[arms]]")
        for key, value in arm.items():
            lines.append(f"{key} = {toml_list(value) if isinstance(value, list) else json.dumps(value)}")
        lines.append("")
    path = tmp / "launch.toml"
    path.write_text("\n".join(lines))
    return path


def sim_arm(arm_id: str, **more: object) -> dict:
    return {"id": arm_id, "base_url": "http://127.0.0.1:{port}/v1", "model": SIM_MODEL, "launch": SIM,
            "ready_timeout_s": 120} | more


def record(config: Path, session: Path, *args: str, timeout: float = RECORD_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tokenreel", "record", "--config", str(config), "--out", str(session), *args],
        cwd=REPO, capture_output=True, text=True, timeout=timeout,
    )


def engines(session: Session) -> list[dict[str, str]]:
    """Every launched engine's recording entry, in recording order."""
    return [entry | {"arm": arm.id} for arm in session.arms for entry in arm.recorded if entry.get("engine_pid")]


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a zombie holds no GPU memory, no port)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def assert_one_at_a_time(session: Session, expected: int) -> None:
    """The engines ran one after another, and none is left running."""
    entries = sorted(engines(session), key=lambda e: e["engine_started_at"])
    assert len(entries) == expected, entries
    for earlier, later in zip(entries, entries[1:], strict=False):
        assert datetime.fromisoformat(earlier["engine_exited_at"]) <= datetime.fromisoformat(later["engine_started_at"]), entries
    for entry in entries:
        assert entry["engine_exited_at"], entry
        assert not alive(int(entry["engine_pid"])), f"engine {entry['arm']} pid {entry['engine_pid']} still running"


# --- config ------------------------------------------------------------------------------------


@pytest.mark.parametrize("arm, field, words", [
    (sim_arm("a", launch="llama-server -m x.gguf"), "arms[0].launch", "list of strings"),
    (sim_arm("a", launch=[]), "arms[0].launch", "non-empty list"),
    (sim_arm("a", ready_timeout_s=0), "arms[0].ready_timeout_s", "greater than 0"),
    (sim_arm("a", ready_url="ftp://127.0.0.1:{port}/health"), "arms[0].ready_url", "http://"),
    ({"id": "a", "base_url": "http://127.0.0.1:{port}/v1", "model": "m"}, "arms[0].base_url", "{port}"),
    (sim_arm("a", base_url="http://127.0.0.1:8000/v1"), "arms[0].base_url", "with {port} too"),
    ({"id": "a", "base_url": "http://127.0.0.1:8000/v1", "model": "m", "ready_timeout_s": 5},
     "arms[0].ready_timeout_s", "goes with launch"),
])
def test_bad_launch_keys_are_one_line_naming_the_field(tmp_path: Path, arm: dict, field: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(tmp_path, [arm]))
    message = str(caught.value)
    assert f"{field}:" in message and words in message and "\n" not in message


def test_launch_keys_load_and_a_key_in_the_command_is_scrubbed(tmp_path: Path) -> None:
    argv = ["llama-server", "-m", "m.gguf", "--port", "{port}", "--api-key", "sk-launch-secret-0123456789"]
    cfg = load_config(write_config(tmp_path, [sim_arm("a", launch=argv, ready_url="http://127.0.0.1:{port}/health"),
                                              {"id": "b", "base_url": "http://127.0.0.1:9/v1", "model": "m"}]))
    launch = launch_of(cfg.arms[0])
    assert launch is not None and launch.argv == tuple(argv) and launch.ready_timeout_s == 120
    assert launch.ready_url == "http://127.0.0.1:{port}/health" and cfg.arms[0].base_url == "http://127.0.0.1:{port}/v1"
    assert launch_of(cfg.arms[1]) is None
    assert scrubbed_argv(launch.argv) == ["llama-server", "-m", "m.gguf", "--port", "{port}", "--api-key", "***"]


def test_sweep_refuses_launch_in_one_line(tmp_path: Path) -> None:
    config = write_config(tmp_path, [sim_arm("a")])
    done = subprocess.run([sys.executable, "-m", "tokenreel", "sweep", "--config", str(config), "--concurrency", "1,2",
                           "--out", str(tmp_path / "w.json")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "arm 'a' has launch" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_check_defers_a_launched_arms_endpoint_to_its_turn(tmp_path: Path) -> None:
    config = write_config(tmp_path, [sim_arm("a"), sim_arm("b", launch=["no-such-engine-29", "--port", "{port}"])])
    done = record(config, tmp_path / "s.json", "--check", timeout=120)
    assert done.returncode == 2, done.stderr
    assert "ok: a: launches" in done.stdout and "at its turn" in done.stdout
    assert "b: launch: 'no-such-engine-29' is not an executable" in done.stderr
    assert not (tmp_path / "s.engines").exists()  # nothing was started


def test_check_names_the_flags_a_launched_vllm_needs_for_its_own_figures(tmp_path: Path) -> None:
    """Without --enable-per-request-metrics vLLM sends no per-request timing (no engine agreement);
    a drafter without --per-request-spec-decode-metrics no acceptance per request."""
    vllm = tmp_path / "bin" / "vllm"
    vllm.parent.mkdir()
    vllm.write_text("#!/bin/sh\nexit 0\n")
    vllm.chmod(0o755)
    spec = [str(vllm), "serve", "tiny", "--port", "{port}", "--speculative-config", '{"method": "ngram"}']
    flagged = [str(vllm), "serve", "tiny", "--port", "{port}", "--enable-per-request-metrics"]
    config = write_config(tmp_path, [sim_arm("plain", launch=spec), sim_arm("flagged", launch=flagged)])
    done = record(config, tmp_path / "s.json", "--check", timeout=120)
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert "plain: vllm serve without --enable-per-request-metrics" in said, said
    assert "plain: vllm serve with a drafter but without --per-request-spec-decode-metrics" in said, said
    assert "flagged: vllm serve" not in said, said


# An engine that echoes its settings as vLLM does ("non-default args: {'api_key': ...}"), the key
# read from its environment or from its last argument (after "=" when it has one).
ECHO = ("import os, sys; key = os.environ.get('OPENAI_API_KEY') or sys.argv[-1].split('=')[-1];"
        " print('args', sys.argv[1:], flush=True); print('non-default args:', {'api_key': key}, flush=True); sys.exit(3)")


@pytest.mark.parametrize("way", ["flag, then the key", "flag=key", "environment"])
def test_the_engine_log_and_the_failure_line_never_hold_the_key(tmp_path: Path, way: str) -> None:
    key = "engine-log-secret-4242424242"  # no key-like prefix: only knowing it scrubs it
    engine = [sys.executable, "-c", ECHO]
    argv = {"flag, then the key": [*engine, "--api-key", key], "flag=key": [*engine, f"--api-key={key}"],
            "environment": ["env", f"OPENAI_API_KEY={key}", *engine]}[way]
    config = write_config(tmp_path, [{"id": "leaky", "base_url": "http://127.0.0.1:{port}/v1", "model": "m", "launch": argv}])
    done = record(config, tmp_path / "s.json", timeout=120)
    assert done.returncode == 1, done.stderr
    log = (tmp_path / "s.engines" / "leaky.log").read_text()
    assert "non-default args: {'api_key': '***'}" in log and key not in log, log
    assert key not in done.stderr + done.stdout and "exited with code 3" in done.stderr
    assert key not in (tmp_path / "s.json").read_text()


# --- with the simulator launched ---------------------------------------------------------------


def test_launched_arms_run_one_at_a_time_and_fail_alone(tmp_path: Path) -> None:
    """Three launched arms beside a command that exits at once and one that never answers: those
    two fail in one line each (naming the command and the log's tail), the others record, their
    engines never overlap and none outlives its arm; --resume relaunches only what it needs."""
    arms = [sim_arm("one"), {"id": "exits", "base_url": "http://127.0.0.1:{port}/v1", "model": SIM_MODEL,
                             "launch": EXITS_AT_ONCE},
            sim_arm("two"), {"id": "hangs", "base_url": "http://127.0.0.1:{port}/v1", "model": SIM_MODEL,
                             "launch": NEVER_ANSWERS, "ready_timeout_s": 3},
            sim_arm("three")]
    config = write_config(tmp_path, arms)
    session_path = tmp_path / "s.json"
    done = record(config, session_path)
    assert done.returncode == 1, done.stderr
    session = archive.load(session_path)
    by_arm = {arm: [r for r in session.runs if r.arm == arm] for arm in ("one", "exits", "two", "hangs", "three")}
    for arm in ("one", "two", "three"):
        assert [r.status for r in by_arm[arm]] == ["ok"], (arm, done.stderr)
    failed = [line for line in done.stderr.splitlines() if ": failed: engine of arm" in line]
    assert len(failed) == 2, done.stderr
    assert failed[0].startswith("exits: failed:") and "exited with code 3" in failed[0] and "no model here" in failed[0]
    assert failed[1].startswith("hangs: failed:") and "within 3 s (ready_timeout_s)" in failed[1] and "loading forever" in failed[1]
    assert [r.status for r in by_arm["exits"] + by_arm["hangs"]] == ["failed", "failed"]
    assert_one_at_a_time(session, 5)
    log = tmp_path / "s.engines" / "one.log"
    assert "tokenreel: started pid" in log.read_text() and "tokenreel: stopped pid" in log.read_text()
    assert session.arm("one").fingerprint["launch"] == SIM
    assert session.arm("one").base_url == "http://127.0.0.1:{port}/v1"  # the template, so --resume matches it

    again = record(config, session_path, "--resume")  # only the two failed arms are relaunched (and fail again)
    assert again.returncode == 1, again.stderr
    resumed = archive.load(session_path)
    assert_one_at_a_time(resumed, 7)
    assert [e["arm"] for e in engines(resumed)].count("one") == 1  # "one" was not relaunched


def test_a_launch_whose_fixed_port_already_answers_is_refused(tmp_path: Path) -> None:
    """A server already holds the arm's fixed port: the launched engine would fail to bind it and
    the runs would measure that other server. The arm fails in one line naming the port and the
    holder's pid; no run is recorded ok, and the engine is never started."""
    from tokenreel.simulator.server import running

    binds_or_dies = [sys.executable, "-c", "import sys, time; time.sleep(0.3); sys.exit('Address already in use')"]
    with running([profile_by_id("bf16")], time_scale=0.02) as cluster:
        fixed = cluster.base_url("bf16")
        config = write_config(tmp_path, [{"id": "fixed", "base_url": fixed, "model": SIM_MODEL, "launch": binds_or_dies}])
        done = record(config, tmp_path / "s.json")
    assert done.returncode == 1, done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("fixed: failed:")]
    port = fixed.split(":")[2].split("/")[0]
    assert f"127.0.0.1:{port} already answers (pid {os.getpid()})" in line and "write {port} in base_url" in line, line
    session = archive.load(tmp_path / "s.json")
    assert [r.status for r in session.runs] == ["failed"] and not engines(session)


def test_resume_with_a_changed_launch_command_is_refused(tmp_path: Path) -> None:
    """The runs of a cell come from one command: --resume under another (here another speed) would
    mix them, so it is refused in one line naming the arm, like any other changed field."""
    config = write_config(tmp_path, [sim_arm("one")])
    session_path = tmp_path / "s.json"
    done = record(config, session_path)
    assert done.returncode == 0, done.stderr
    slower = [*SIM[:-1], "0.05"]
    config = write_config(tmp_path, [sim_arm("one", launch=slower)], repeats=2)
    again = record(config, session_path, "--resume")
    assert again.returncode == 2, again.stderr
    assert "changes what the archive recorded: arm 'one' launch;" in again.stderr and len(again.stderr.splitlines()) == 1
    assert len(archive.load(session_path).runs) == 1


def chatty(output: str) -> list[str]:
    """A launch that prints `output` (Python expression of a str, written in 1 MB pieces) and
    then serves as the simulator on {port}."""
    script = ("import os, sys\n"
              f"text = {output}\n"
              "for i in range(0, len(text), 1 << 20):\n    sys.stdout.write(text[i:i + (1 << 20)])\n"
              "sys.stdout.flush()\n"
              "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n")
    return [sys.executable, "-c", script, *SIM[1:]]


def peak_rss_mib(command: list[str]) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run `command`, sampling its resident memory (VmRSS) every 20 ms: (its result, the peak)."""
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    while proc.poll() is None:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
            peak = max(peak, int(status.split("VmRSS:")[1].split()[0]))
        except (OSError, IndexError):
            pass
        time.sleep(0.02)
    stdout, stderr = proc.communicate()
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr), peak / 1024


def test_an_endless_output_line_is_read_in_bounded_pieces(tmp_path: Path) -> None:
    """300 MB of engine output without a newline: record's memory stays near its usual size (it read
    the whole line before), the log keeps its cap, the arm records."""
    config = write_config(tmp_path, [sim_arm("long", launch=chatty("'x' * (300 << 20) + '\\n'"))])
    done, peak = peak_rss_mib([sys.executable, "-m", "tokenreel", "record", "--config", str(config), "--out",
                               str(tmp_path / "s.json")])
    assert done.returncode == 0, done.stderr
    print(f"record's peak RSS with a 300 MB output line: {peak:.0f} MiB")
    assert peak < 250, peak
    log = tmp_path / "s.engines" / "long.log"
    assert log.stat().st_size < 9 << 20 and "bytes of output not kept" in log.read_text()[-200:]


def test_an_unwritable_engine_log_is_said_once_and_the_output_still_drained(tmp_path: Path) -> None:
    """A link planted at the log's name is not followed (its target stays as it was); the log's
    problem is said once and the engine's 4 MB of output is drained, so it never blocks."""
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me\n")
    (tmp_path / "s.engines").mkdir()
    (tmp_path / "s.engines" / "loud.log").symlink_to(target)
    config = write_config(tmp_path, [sim_arm("loud", launch=chatty("('engine says hello ' * 50 + '\\n') * 4000"))],
                          repeats=2)
    done = record(config, tmp_path / "s.json")
    assert done.returncode == 0, done.stderr
    lost = [line for line in done.stderr.splitlines() if line.startswith("warning: loud: engine log ")]
    assert len(lost) == 1 and "cannot be written" in lost[0] and "drained, not kept" in lost[0], done.stderr
    assert target.read_text() == "keep me\n"
    assert [r.status for r in archive.load(tmp_path / "s.json").runs] == ["ok", "ok"]


def test_an_engine_log_that_hits_the_file_size_limit_is_said_once_and_the_output_still_drained(tmp_path: Path) -> None:
    """`record` under a 1 MiB file-size limit (as a quota or a full disk stops a write midway):
    the log's writes fail past it, that is said once, the rest of the engine's 4 MB is drained,
    and the runs and the session are kept."""
    config = write_config(tmp_path, [sim_arm("loud", launch=chatty("('engine says hello ' * 50 + '\\n') * 4000"))],
                          repeats=2)
    limit = 1 << 20

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    command = [sys.executable, "-m", "tokenreel", "record", "--config", str(config), "--out", str(tmp_path / "s.json")]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=RECORD_TIMEOUT_S, preexec_fn=limited)
    assert done.returncode == 0, done.stderr
    lost = [line for line in done.stderr.splitlines() if line.startswith("warning: loud: engine log ")]
    assert len(lost) == 1 and "cannot be written (File too large)" in lost[0] and "drained, not kept" in lost[0], done.stderr
    assert 0 < (tmp_path / "s.engines" / "loud.log").stat().st_size <= limit
    assert [r.status for r in archive.load(tmp_path / "s.json").runs] == ["ok", "ok"]


# An engine that dies once it has served a request: its server (the simulator, a child) is killed
# when /metrics shows a request running and then none, and it exits 7.
DIES_AFTER_A_REQUEST = [sys.executable, "-c", """
import subprocess, sys, time, urllib.request
port = sys.argv[1]
server = subprocess.Popen([sys.executable, "-m", "tokenreel", "simulate", "--profiles", "bf16", "--port", port])
seen = False
while True:
    time.sleep(0.01)
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1).read().decode()
    except OSError:
        continue
    running = [line for line in text.splitlines() if line.startswith("vllm:num_requests_running")]
    if running and float(running[0].split()[-1]) > 0:
        seen = True
    elif seen:
        server.kill()
        server.wait()
        print("engine crashed", flush=True)
        sys.exit(7)
""", "{port}"]


def test_an_engine_that_exits_mid_arm_is_named_in_the_failed_runs(tmp_path: Path) -> None:
    """The runs after the engine's death fail with its exit code and last lines, not "cannot
    connect ... start the server"; a run recorded before it stays ok."""
    config = write_config(tmp_path, [sim_arm("dies", launch=DIES_AFTER_A_REQUEST)], max_tokens=32, repeats=4)
    done = record(config, tmp_path / "s.json")
    assert done.returncode == 1, done.stderr
    runs = archive.load(tmp_path / "s.json").runs
    failed = [r for r in runs if r.status == "failed"]
    assert failed and all(r.status == "ok" for r in runs[: len(runs) - len(failed)]), [(r.status, r.error) for r in runs]
    assert "exited with code 7 during the runs" in (failed[-1].error or "") and "engine crashed" in (failed[-1].error or "")
    assert "start the server or fix base_url" not in done.stderr, done.stderr


def test_ctrl_c_mid_arm_leaves_no_engine(tmp_path: Path) -> None:
    proc, session_path = start_long_record(tmp_path, sim_arm("slow"), repeats=3)
    pid = wait_for_engine(session_path, proc)
    time.sleep(1)  # into the first run
    proc.send_signal(signal.SIGINT)
    _, stderr = finish(proc, timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert not alive(pid), f"engine pid {pid} survived Ctrl-C"
    assert_one_at_a_time(archive.load(session_path), 1)


def start_long_record(tmp_path: Path, arm: dict, repeats: int = 1) -> tuple[subprocess.Popen[str], Path]:
    """record of one launched arm with long runs (4,000 tokens, the simulator at full speed), in
    the background: (its process, the session path)."""
    config = write_config(tmp_path, [arm], max_tokens=4000, repeats=repeats)
    config.write_text(config.read_text().replace('"0.02"', '"1"'))
    session_path = tmp_path / "s.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenreel", "record", "--config", str(config), "--out", str(session_path)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    return proc, session_path


def gone(running: Callable[[], bool], timeout_s: float = 30) -> bool:
    """Whether `running()` turns false within the timeout (the kernel reaps a killed group in its own time)."""
    deadline = time.monotonic() + timeout_s
    while running() and time.monotonic() < deadline:
        time.sleep(0.1)
    return not running()


def test_sigkill_of_record_kills_the_engine(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG: the kernel stops the engine even when record gets no chance to."""
    proc, session_path = start_long_record(tmp_path, sim_arm("slow"))
    pid = wait_for_engine(session_path, proc)
    proc.kill()
    finish(proc)
    assert gone(lambda: alive(pid)), f"engine pid {pid} survived SIGKILL of record"


# A wrapper whose server is its child (as a shell script's or vLLM's engine core): the parent-death
# signal of the process record starts never reaches the server itself.
FORKS_ITS_SERVER = [sys.executable, "-c", "import subprocess, sys; sys.exit(subprocess.call([sys.executable, *sys.argv[1:]]))",
                    *SIM[1:]]


def group_members(pgid: int) -> list[int]:
    """Live processes of a process group (zombies hold no port)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def test_sigkill_of_record_stops_an_engine_that_serves_from_a_child(tmp_path: Path) -> None:
    """record SIGKILLed mid-run: no process of the launched engine's group survives, its server
    (the wrapper's child) included, and the port is free again."""
    proc, session_path = start_long_record(tmp_path, sim_arm("forks", launch=FORKS_ITS_SERVER))
    pid = wait_for_engine(session_path, proc)
    head = (tmp_path / "s.engines" / "forks.log").read_text().split("\n", 1)[0]  # "started pid P at T: argv"
    port = int(head.split(" --port ")[1].split()[0])
    assert len(group_members(pid)) >= 2  # the wrapper and its server (and the keeper)
    proc.kill()
    finish(proc)
    assert gone(lambda: bool(group_members(pid))), f"processes {group_members(pid)} of the engine's group survived SIGKILL of record"
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still answers"


def wait_for_engine(session_path: Path, proc: subprocess.Popen[str], timeout: float = 180) -> int:
    """The pid of the engine `record` launched, once it runs (from its log's first line)."""
    log = session_path.parent / f"{session_path.stem}.engines"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        for path in log.glob("*.log") if log.is_dir() else ():
            head = path.read_text(errors="replace").split("\n", 1)[0]
            if head.startswith("tokenreel: started pid ") and _answers(session_path):
                return int(head.split()[3])
        time.sleep(0.1)
    raise AssertionError(f"no engine started under {log}")


def _answers(session_path: Path) -> bool:
    """The arm's fingerprint is saved: its engine answered and the runs begin."""
    try:
        return any(arm.fingerprint for arm in archive.load(session_path).arms)
    except (ArchiveError, OSError):
        return False


# --- with the real llama.cpp build (tests/engines) --------------------------------------------


def llamacpp_argv(model: Path, draft: Path | None = None) -> list[str]:
    from tests.engines import build

    spec = ["-md", str(draft), "--spec-type", "draft-simple", "--spec-draft-n-max", "8"] if draft else []
    return [str(build.binary("llama-server")), "-m", str(model), *spec, "--host", "127.0.0.1", "--port", "{port}",
            "-np", "1", "-c", "2048", "-t", "1", "-tb", "1", "--poll", "0", "--no-webui", "--metrics"]


@pytest.fixture(scope="module")
def llamacpp():
    """The cached build and models (make engine builds them once; never built here)."""
    from tests.engines import build, models

    if not build.binary("llama-server").exists():
        pytest.fail("engine tests need the cached llama.cpp build: run `make engine` first", pytrace=False)
    return models.generate()


@pytest.mark.engine
def test_three_llamacpp_arms_through_launch_only(tmp_path: Path, llamacpp) -> None:
    arms = [
        {"id": "f16", "base_url": "http://127.0.0.1:{port}/v1", "model": "tiny", "launch": llamacpp_argv(llamacpp.f16)},
        {"id": "exits", "base_url": "http://127.0.0.1:{port}/v1", "model": "tiny",
         "launch": [str(Path(llamacpp_argv(llamacpp.f16)[0])), "--no-such-flag"]},
        {"id": "q4_0", "base_url": "http://127.0.0.1:{port}/v1", "model": "tiny", "launch": llamacpp_argv(llamacpp.q4_0)},
        {"id": "hangs", "base_url": "http://127.0.0.1:{port}/v1", "model": "tiny", "launch": NEVER_ANSWERS, "ready_timeout_s": 3},
        {"id": "q4_0-spec", "base_url": "http://127.0.0.1:{port}/v1", "model": "tiny",
         "launch": llamacpp_argv(llamacpp.q4_0, llamacpp.draft)},
    ]
    config = write_config(tmp_path, arms, max_tokens=64, idle_wait_s=30)
    session_path = tmp_path / "s.json"
    done = record(config, session_path, timeout=1200)
    assert done.returncode == 1, done.stderr
    session = archive.load(session_path)
    for arm in ("f16", "q4_0", "q4_0-spec"):
        runs = [r for r in session.runs if r.arm == arm]
        assert runs and all(r.status == "ok" for r in runs), (arm, done.stderr)
        assert session.arm(arm).fingerprint.get("props") is not None  # llama.cpp answered the fingerprint
    failed = [line for line in done.stderr.splitlines() if ": failed: engine of arm" in line]
    assert [line.split(":")[0] for line in failed] == ["exits", "hangs"], done.stderr
    assert "exited with code" in failed[0]
    assert_one_at_a_time(session, 5)


@pytest.mark.engine
def test_ctrl_c_mid_llamacpp_arm_leaves_no_engine(tmp_path: Path, llamacpp) -> None:
    arms = [{"id": "f16", "base_url": "http://127.0.0.1:{port}/v1", "model": "tiny", "launch": llamacpp_argv(llamacpp.f16)}]
    config = write_config(tmp_path, arms, max_tokens=1024, repeats=3, idle_wait_s=30)
    session_path = tmp_path / "s.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenreel", "record", "--config", str(config), "--out", str(session_path)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    pid = wait_for_engine(session_path, proc, timeout=300)
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    _, stderr = finish(proc, timeout=120)
    assert proc.returncode == 130, stderr
    assert not alive(pid), f"llama-server pid {pid} survived Ctrl-C"
    assert_one_at_a_time(archive.load(session_path), 1)
    assert os.path.getsize(session_path.parent / "s.engines" / "f16.log") > 0
