"""Nothing from outside drives the terminal (issue 11, item 7): escape sequences in server error
bodies, session names and labels are stripped where the console prints, not at call sites."""

from __future__ import annotations

import asyncio
import io
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from rich.text import Text
from typer.testing import CliRunner

from tokenreel.cli import app
from tokenreel.cli.terminal import CliConsole

CLEAR = "\x1b[2J\x1b[H"  # clear the screen, cursor home
TITLE = "\x1b]0;owned\x07"  # set the window title
RED = "\x1b[31m"
HOSTILE = f"{CLEAR}{TITLE}{RED}boom\x1b[0m\x9b2J\x07"
# Any escape, C1 control (8-bit CSI) or bell in the output is an injection: rich adds no colour
# when it writes to a pipe.
INJECTED = re.compile("[\x1b\x07\x9b]")


@pytest.fixture
def hostile_server() -> Iterator[str]:
    """An endpoint whose every answer is an HTTP 500 full of escape sequences, in its own thread."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    root: list[str] = []

    async def fail(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": HOSTILE}}, status=500)

    async def start() -> web.AppRunner:
        application = web.Application()
        application.router.add_route("*", "/{tail:.*}", fail)
        runner = web.AppRunner(application, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        root.append(f"http://127.0.0.1:{runner.addresses[0][1]}")
        return runner

    def serve() -> None:
        asyncio.set_event_loop(loop)
        runner = loop.run_until_complete(start())
        started.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert started.wait(10)
    yield root[0]
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def test_record_and_report_print_no_escape_from_server_name_or_label(tmp_path: Path, hostile_server: str) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        "[session]\n"
        'name = "ladder\\u001b[2J\\u001b]0;owned\\u0007"\n'
        'prompts = "builtin:ladder4"\nmax_tokens = 4\nwarmup = 0\nrepeats = 1\nidle_wait_s = 0.1\n'
        "[[arms]]\n"
        'id = "a"\n'
        'label = "Original\\u001b[31m bf16\\u009b2J"\n'
        f'base_url = "{hostile_server}/v1"\nmodel = "m"\n',
        encoding="utf-8",
    )
    session = tmp_path / "s.json"
    recorded = CliRunner().invoke(app, ["record", "--config", str(config), "--out", str(session), "--no-preflight"])
    assert recorded.exit_code == 1, recorded.output
    assert "HTTP 500" in recorded.output and "boom" in recorded.output
    assert not INJECTED.search(recorded.output), repr(recorded.output[:400])
    reported = CliRunner().invoke(app, ["report", str(session)])
    assert reported.exit_code == 0 and "Original bf16" in reported.output
    assert not INJECTED.search(reported.output), repr(reported.output[:400])


def test_the_console_strips_outside_escapes_but_keeps_its_own_styles() -> None:
    buffer = io.StringIO()
    console = CliConsole(file=buffer, force_terminal=True, color_system="standard", width=200)
    console.print(Text("ours", style="red"), f"theirs {HOSTILE}", markup=False)
    console.print(Text(f"label {TITLE}x"))
    output = buffer.getvalue()
    assert "\x1b[31mours" in output  # rich's own colour for our Text
    for sequence in (CLEAR, TITLE, "\x9b", "\x07", "\x1b]"):
        assert sequence not in output
    assert "theirs boom" in output and "label" in output and "x\n" in output


def test_strip_controls_removes_sequences_whole_and_keeps_text() -> None:
    from tokenreel.base.safe_text import strip_controls

    assert strip_controls(f"a{CLEAR}b{TITLE}c\x1b]8;;http://x\x1b\\d\te\n") == "abcd\te\n"
    assert strip_controls("Original · bf16 ✓") == "Original · bf16 ✓"


# --- paths are shown escaped, never stripped (issue 25, item 12) -----------------------------------

# A file name no one types, but one a hostile archive or a careless script can leave: an escape
# sequence, a right-to-left override, a newline and a byte that is not UTF-8.
ODD_NAME = "run\x1b[2J\u202egnp\nx\udcff"


def test_shown_path_escapes_controls_bidi_and_undecodable_bytes() -> None:
    from tokenreel.base.safe_text import shown_path

    assert shown_path(Path("/tmp") / f"{ODD_NAME}.json") == "/tmp/run\\x1b[2J\\u202egnp\\x0ax\\udcff.json"
    assert shown_path("plain/session.json") == "plain/session.json"


def test_printed_paths_name_the_real_file_escaped(tmp_path: Path) -> None:
    """Stripped, "run\\x1b[2J..." would print as "run[2J...", a file that does not exist; escaped,
    the line names the file, and a terminal still gets no control character from it."""
    from tests.test_render_encode import write_session
    from tokenreel.base.safe_text import shown_path

    broken = tmp_path / f"{ODD_NAME}.json"
    broken.write_bytes(b"{not json")
    session = write_session(tmp_path / "s.json")
    report = tmp_path / f"{ODD_NAME}.md"
    runner = CliRunner()
    cases = [
        (("report", str(broken)), 2, f"tokenreel: {shown_path(broken)}: not valid JSON"),
        (("report", str(tmp_path / f"{ODD_NAME}-missing.json")), 2, f"{shown_path(tmp_path / ODD_NAME)}-missing.json: no such file"),
        (("report", str(session), "-o", str(report)), 0, f"report written to {shown_path(report)}"),
        (("report", str(session), "-o", str(report)), 2, f"tokenreel: {shown_path(report)} already exists"),
        (("plot", str(session), "--out", str(tmp_path / ODD_NAME), "--format", "svg"), 0,
         f"{shown_path(tmp_path / ODD_NAME)}{os.sep}"),
    ]
    for args, code, expected in cases:
        result = runner.invoke(app, list(args))
        assert result.exit_code == code, (args, result.output)
        assert expected in result.output, (args, result.output)
        assert not INJECTED.search(result.output) and "\u202e" not in result.output
    assert report.read_text().startswith("#")
