"""A tiny Chrome DevTools Protocol driver: real headless Chromium for the HTML report's tests.

Why not Playwright: it downloads its own browser builds; the tests want Debian's `chromium`
(installed by `make test` like ffmpeg) and only a handful of protocol calls, which fit in one
websocket (aiohttp's client, already a dependency) and this file.

One `Chromium` per test module (it takes about a second to start); `new_page()` opens a tab
attached over the browser's websocket with a flat session id, with Runtime, Log, Network and
Page enabled, so every console message, exception and request the page makes is recorded in
`Page.events` from the start.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

DEBIAN_CHROMIUM = "/usr/bin/chromium"
START_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 30.0
_WS_URL = re.compile(r"DevTools listening on (ws://\S+)")


class BrowserError(RuntimeError):
    """Chromium did not start, or answered a protocol call with an error."""


def chromium_executable() -> str | None:
    """Debian's chromium, else `chromium` on PATH; None when there is none."""
    if os.access(DEBIAN_CHROMIUM, os.X_OK):
        return DEBIAN_CHROMIUM
    return shutil.which("chromium")


@dataclass
class Page:
    """One tab: protocol calls go to its session; its events are kept in arrival order."""

    browser: Chromium
    session_id: str
    target_id: str
    events: list[dict[str, Any]] = field(default_factory=list)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        return self.browser.call(method, params, self.session_id)

    def evaluate(self, expression: str) -> Any:
        """The expression's value (JSON-able), awaited if it is a promise; raises on a JS exception."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise BrowserError(f"JavaScript exception in {expression[:60]!r}: {text}")
        return result["result"].get("value")

    def navigate(self, url: str) -> None:
        """Load url and wait for its load event."""
        seen = len(self.events)
        answer = self.call("Page.navigate", url=url)
        if answer.get("errorText"):
            raise BrowserError(f"cannot load {url}: {answer['errorText']}")
        self.browser.wait_for(lambda: any(e["method"] == "Page.loadEventFired" for e in self.events[seen:]))

    def settle(self, seconds: float) -> None:
        """Keep reading events for a while (the page may still log or fetch after load)."""
        self.browser.pump(seconds)

    def set_viewport(self, width: int, height: int) -> None:
        """Lay the page out at width x height CSS pixels (a phone's, a desktop's)."""
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def screenshot(self, path: Path, full_page: bool = False) -> None:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", **params)["data"]))

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions and log entries of level warning or error."""
        out = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                out.append(f"exception: {details.get('exception', {}).get('description') or details.get('text')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
                args = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
                out.append(f"console.{params['type']}: {args}")
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                entry = params["entry"]
                out.append(f"log {entry['level']} ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}".rstrip())
        return out

    def requests(self) -> list[str]:
        """The URL of every request the page started (its own document included)."""
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def close(self) -> None:
        self.browser.call("Target.closeTarget", {"targetId": self.target_id})


class Chromium:
    """Headless Chromium started with a private profile, driven over its browser websocket."""

    def __init__(self, workdir: Path, width: int = 1280, height: int = 900) -> None:
        executable = chromium_executable()
        if executable is None:
            raise BrowserError("no Chromium: install Debian's chromium package (make test does, as root on Debian)")
        workdir.mkdir(parents=True, exist_ok=True)
        self._stderr_path = workdir / "chromium.stderr"
        # stderr to a file, not a pipe: nobody drains a pipe after start-up and a full one blocks Chromium.
        with open(self._stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                [
                    executable, "--headless=new", "--no-sandbox", "--remote-debugging-port=0",
                    f"--user-data-dir={workdir / 'profile'}", f"--window-size={width},{height}",
                    "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--hide-scrollbars", "--mute-audio", "about:blank",
                ],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                start_new_session=True,  # its own process group: close() ends its helpers with it
            )
        self.width, self.height = width, height
        self._next_id = 0
        self._answers: dict[int, dict[str, Any]] = {}
        self._pages: dict[str, Page] = {}
        self._loop = asyncio.new_event_loop()
        try:
            url = self._websocket_url()
            self._http = self._loop.run_until_complete(self._open_session())
            self._ws = self._loop.run_until_complete(self._http.ws_connect(url, max_msg_size=0, autoping=False))
        except BaseException:
            self.close()
            raise

    async def _open_session(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession()

    def _websocket_url(self) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            text = self._stderr_path.read_text(errors="replace")
            found = _WS_URL.search(text)
            if found:
                return found[1]
            if self.process.poll() is not None:
                raise BrowserError(f"chromium exited with {self.process.returncode} before listening: {text.strip()[-400:]}")
            time.sleep(0.05)
        raise BrowserError(f"chromium printed no DevTools URL within {START_TIMEOUT_S:.0f} s")

    # -- protocol -----------------------------------------------------------------------------

    async def _receive_one(self) -> None:
        message = await self._ws.receive()
        if message.type != aiohttp.WSMsgType.TEXT:
            raise BrowserError(f"DevTools websocket closed ({message.type.name})")
        data = json.loads(message.data)
        if "id" in data:
            self._answers[data["id"]] = data
        elif data.get("sessionId") in self._pages:
            self._pages[data["sessionId"]].events.append(data)

    async def _call(self, method: str, params: dict[str, Any], session_id: str | None) -> dict[str, Any]:
        self._next_id += 1
        call_id = self._next_id
        message: dict[str, Any] = {"id": call_id, "method": method, "params": params}
        if session_id is not None:
            message["sessionId"] = session_id
        await self._ws.send_str(json.dumps(message))
        while call_id not in self._answers:
            await self._receive_one()
        answer = self._answers.pop(call_id)
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error'].get('message')} {answer['error'].get('data', '')}".rstrip())
        return answer.get("result", {})

    def call(self, method: str, params: dict[str, Any] | None = None, session_id: str | None = None) -> dict[str, Any]:
        return self._loop.run_until_complete(asyncio.wait_for(self._call(method, params or {}, session_id), CALL_TIMEOUT_S))

    def pump(self, seconds: float) -> None:
        """Read events for `seconds` (events otherwise wait in the socket until the next call)."""

        async def read() -> None:
            while True:
                await self._receive_one()

        try:
            self._loop.run_until_complete(asyncio.wait_for(read(), seconds))
        except asyncio.TimeoutError:
            pass

    def wait_for(self, condition: Any, timeout: float = CALL_TIMEOUT_S) -> None:
        async def read() -> None:
            while not condition():
                await self._receive_one()

        try:
            self._loop.run_until_complete(asyncio.wait_for(read(), timeout))
        except asyncio.TimeoutError:
            raise BrowserError(f"no answer from the page within {timeout:.0f} s") from None

    def new_page(self) -> Page:
        """A fresh tab at about:blank, instrumented before anything loads into it."""
        target_id = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session_id = self.call("Target.attachToTarget", {"targetId": target_id, "flatten": True})["sessionId"]
        page = Page(self, session_id, target_id)
        self._pages[session_id] = page
        for domain in ("Runtime", "Log", "Network", "Page"):
            page.call(f"{domain}.enable")
        page.set_viewport(self.width, self.height)
        return page

    def close(self) -> None:
        """Ask Chromium to quit, then end its process group if it has not."""
        try:
            if hasattr(self, "_ws"):
                self.call("Browser.close")
        except (BrowserError, aiohttp.ClientError, asyncio.TimeoutError, ConnectionError):
            pass
        for closing in ("_ws", "_http"):
            if hasattr(self, closing):
                self._loop.run_until_complete(getattr(self, closing).close())
        self._loop.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # its helpers (zygote, gpu, renderers)
        except ProcessLookupError:
            pass
        self.process.wait()
