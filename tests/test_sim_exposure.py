"""The simulator's exposure (issue 11, item 11), over real sockets on 127.0.0.1 only.

Any web page open on the machine can POST to a loopback port (text/plain and form bodies need
no CORS preflight), so /sim takes only application/json carrying the process's token; an
address that is not loopback must be given explicitly and is warned about; a malformed
request is a 400 with one line, never a 500 with a traceback.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import orjson
import pytest

from tests.test_recorder_support import finish
from tokenreel.simulator.profiles import profile_by_id

REPO = Path(__file__).resolve().parents[1]
ENGINES = ("vllm", "sglang", "llamacpp")
NOT_HERE = "198.51.100.77"  # TEST-NET-2: never a local address, so binding it fails (nothing is sent)


# A bound for a hang, not a speed test: beside two CPU hogs `tokenreel simulate` took over 20 s
# to start and stop.
HANG_S = 60

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def one_line_error(response: httpx.Response) -> str:
    message = response.json()["error"]["message"]
    assert "\n" not in message and "Traceback" not in message, message
    return message


def test_sim_controls_need_the_token_and_json(make_sim) -> None:
    cluster = make_sim([profile_by_id("bf16")])
    url = cluster.root_url("bf16") + "/sim/state"
    token = {"X-Sim-Token": cluster.token}
    fault = orjson.dumps({"fault": {"mode": "500", "count": 5}})
    attempts = [  # what a web page can send without a CORS preflight, then a guessed token
        httpx.post(url, content=fault, headers={"Content-Type": "text/plain"}),
        httpx.post(url, content=fault, headers={"Content-Type": "application/x-www-form-urlencoded"}),
        httpx.post(url, data={"fault": "500"}),
        httpx.post(url, content=fault, headers={"Content-Type": "application/json"}),
        httpx.post(url, content=fault, headers={"Content-Type": "application/json", "X-Sim-Token": "guess"}),
    ]
    assert [r.status_code for r in attempts] == [403] * 5
    assert "X-Sim-Token" in one_line_error(attempts[0])
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        refused = httpx.post(url, content=fault, headers={**token, "Content-Type": content_type})
        assert refused.status_code == 415 and "application/json" in one_line_error(refused)
    assert [httpx.get(cluster.root_url("bf16") + path).status_code for path in ("/sim/state", "/sim/requests", "/sim/sent")] == [403] * 3
    assert httpx.get(url, headers=token).json()["fault"] == {"mode": None, "count": 0}  # nothing was armed
    armed = httpx.post(url, content=fault, headers={**cluster.control_headers, "Content-Type": "application/json"})
    assert armed.status_code == 200 and armed.json()["fault"] == {"mode": "500", "count": 5}


@pytest.mark.parametrize("engine", ENGINES)
def test_malformed_requests_get_400_with_one_line(make_sim, engine: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    cluster = make_sim([dataclasses.replace(profile_by_id("bf16"), engine=engine)])
    root = cluster.root_url("bf16")
    hi = [{"role": "user", "content": "hi"}]
    bodies = [
        {"messages": [5]},
        {"messages": ["hi"]},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}], "max_tokens": 4},
        {"messages": hi, "max_tokens": "many"},
    ]
    for body in bodies:
        response = httpx.post(root + "/v1/chat/completions", json=body)
        assert response.status_code == 400, (body, response.status_code, response.text)
        one_line_error(response)
    headers = {**cluster.control_headers, "Content-Type": "application/json"}
    for state in (b"\xff\xfe", b'{"busy": {"running": 1e308}}', b'{"contention": {"tok_s": 1e300, "seconds": 1e300}}',
                  b'{"fault": {"mode": "500", "count": 1e308}}', b'{"fault": {"mode": ["500"]}}', b"[1]"):
        response = httpx.post(root + "/sim/state", content=state, headers=headers)
        assert response.status_code == 400, (state, response.status_code, response.text)
        one_line_error(response)
    with socket.create_connection(("127.0.0.1", cluster.port("bf16")), timeout=5) as raw:
        raw.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
        assert raw.recv(100).split(b"\r\n")[0].split()[1] == b"400"
    assert httpx.get(root + "/sim/state", headers=cluster.control_headers).json()["fault"]["count"] == 0
    time.sleep(0.1)  # the server thread logs after answering
    tracebacks = [r for r in caplog.records if r.exc_info or r.exc_text or "Traceback" in r.getMessage()]
    assert not tracebacks, [r.getMessage() for r in tracebacks]


def simulate(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tokenreel", "simulate", "--time-scale", "0.01", *args],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_simulate_listens_only_where_told(tmp_path: Path) -> None:
    port = free_port()
    empty = simulate("--host", "", "--port", str(port))
    out, err = finish(empty, 20)  # "" would be every interface: refused, never served
    assert empty.returncode == 2, (out, err)
    assert err.count("\n") == 1 and "--host ''" in err and "127.0.0.1" in err and "0.0.0.0" in err
    elsewhere = simulate("--host", NOT_HERE, "--port", str(port), "--profiles", "bf16")
    out, err = finish(elsewhere, 20)  # named explicitly: allowed, said loudly (here it cannot be bound)
    lines = err.strip().splitlines()
    assert elsewhere.returncode == 2 and "Traceback" not in err, err
    assert lines[0].startswith("WARNING: listening on " + NOT_HERE) and "not loopback" in lines[0]
    assert len(lines) == 2 and f"{NOT_HERE}:{port}" in lines[1] and "--port" in lines[1]


def test_simulate_prints_the_token_that_opens_sim(tmp_path: Path) -> None:
    port = free_port()
    proc = simulate("--profiles", "bf16", "--port", str(port))
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    try:
        token = None
        deadline = time.monotonic() + HANG_S
        while token is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if "X-Sim-Token:" in line:
                token = line.rsplit("X-Sim-Token:", 1)[1].strip()
        assert token, "simulate printed no token"
        url = f"http://127.0.0.1:{port}/sim/state"
        while time.monotonic() < deadline:
            try:
                refused = httpx.post(url, json={"busy": {"running": 1}})
                break
            except httpx.ConnectError:
                time.sleep(0.05)
        assert refused.status_code == 403
        accepted = httpx.post(url, json={"busy": {"running": 1}}, headers={"X-Sim-Token": token})
        assert accepted.status_code == 200 and accepted.json()["busy"]["running"] == 1
    finally:
        proc.send_signal(signal.SIGINT)
        finish(proc, HANG_S)
