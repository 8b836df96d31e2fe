"""A real headless Chromium, driven over the DevTools protocol (no Selenium, no
Playwright download: Debian's ``chromium`` and aiohttp's websocket client).

``Browser.open()`` starts Chromium on a throwaway profile; ``page.goto(url)``,
``page.text(selector)``, ``page.click(selector)`` (waits for the navigation it causes),
``page.wait_for(js)`` and ``page.screenshot(path)`` are all the tests need.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import aiohttp

START_TIMEOUT_S = 30.0
STEP_TIMEOUT_S = 30.0


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    def __init__(self, executable: str, *flags: str) -> None:
        self._profile = tempfile.mkdtemp(prefix="eventq-chromium-")
        self._process = subprocess.Popen(
            [executable, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             f"--user-data-dir={self._profile}", "--window-size=1280,900", *flags,
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        self._loop = asyncio.new_event_loop()
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._events: list[dict] = []
        self._session: str | None = None
        port_file = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"chromium did not start: {self._stderr()}")
            time.sleep(0.1)
        port, path = port_file.read_text().splitlines()[:2]
        self._run(self._connect(f"ws://127.0.0.1:{port}{path}"))

    @classmethod
    def open(cls, *flags: str) -> "Browser":
        """``flags``: more of Chromium's command line (``--ignore-certificate-errors``
        for a server whose certificate is the tests' own)."""
        executable = chromium_path()
        if executable is None:
            raise RuntimeError("chromium is not installed (make browser installs it)")
        return cls(executable, *flags)

    def _stderr(self) -> str:
        try:
            return self._process.stderr.read(4000).decode(errors="replace")
        except Exception:
            return ""

    def _run(self, coroutine):
        return self._loop.run_until_complete(asyncio.wait_for(coroutine, STEP_TIMEOUT_S))

    async def _connect(self, url: str) -> None:
        self._http = aiohttp.ClientSession()
        self._ws = await self._http.ws_connect(url, max_msg_size=0)
        self._reader = self._loop.create_task(self._read())
        target = await self._send("Target.createTarget", {"url": "about:blank"}, browser=True)
        attached = await self._send("Target.attachToTarget",
                                    {"targetId": target["targetId"], "flatten": True},
                                    browser=True)
        self._session = attached["sessionId"]
        await self._send("Page.enable")
        await self._send("Emulation.setDeviceMetricsOverride",
                         {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})

    async def _read(self) -> None:
        async for message in self._ws:
            data = json.loads(message.data)
            future = self._pending.pop(data.get("id"), None)
            if future is not None and not future.done():
                if "error" in data:
                    future.set_exception(RuntimeError(f"DevTools: {data['error']}"))
                else:
                    future.set_result(data.get("result", {}))
            elif "method" in data:
                self._events.append(data)

    async def _send(self, method: str, params: dict | None = None, browser: bool = False):
        ident = next(self._ids)
        message = {"id": ident, "method": method, "params": params or {}}
        if not browser:
            message["sessionId"] = self._session
        future = self._loop.create_future()
        self._pending[ident] = future
        await self._ws.send_str(json.dumps(message))
        return await future

    async def _loaded(self, since: int) -> None:
        while not any(e["method"] == "Page.loadEventFired" for e in self._events[since:]):
            await asyncio.sleep(0.05)

    # --- what tests use ---------------------------------------------------------------

    def goto(self, url: str) -> None:
        since = len(self._events)
        result = self._run(self._send("Page.navigate", {"url": url}))
        if result.get("errorText"):
            raise RuntimeError(f"cannot open {url}: {result['errorText']}")
        self._run(self._loaded(since))

    def evaluate(self, expression: str):
        result = self._run(self._send("Runtime.evaluate",
                                      {"expression": expression, "returnByValue": True}))
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def text(self, selector: str = "body") -> str:
        return self.evaluate(
            f"(document.querySelector({json.dumps(selector)}) || {{innerText: ''}}).innerText")

    def url(self) -> str:
        return self.evaluate("location.href")

    def click(self, selector: str) -> None:
        """Click and wait for the page the click leads to."""
        since = len(self._events)
        clicked = self.evaluate(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
            " if (!el) return false; el.click(); return true; })()")
        if not clicked:
            raise AssertionError(f"nothing to click at {selector}: {self.text()[:500]}")
        self._run(self._loaded(since))

    def wait_for(self, expression: str, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.evaluate(expression):
            if time.monotonic() > deadline:
                raise AssertionError(f"not true after {timeout_s}s: {expression}\n"
                                     f"{self.text()[:2000]}")
            time.sleep(0.2)

    def screenshot(self, path: Path) -> Path:
        result = self._run(self._send("Page.captureScreenshot",
                                      {"format": "png", "captureBeyondViewport": True}))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(result["data"]))
        return path

    def close(self) -> None:
        try:
            if getattr(self, "_http", None) is not None:
                self._run(self._ws.close())
                self._run(self._http.close())
        except Exception:
            pass
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
        self._loop.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


