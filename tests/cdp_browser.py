"""A small driver of Debian's chromium over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: fd 3 to the browser, fd 4 back; messages are
JSON, each ended by a NUL byte): navigate, click an element with real mouse
events, run a line of JavaScript, and collect what the page logged or threw.
Nothing is downloaded; the browser is the system's.  Playwright would do the
same, but it is not a dependency of the project."""

from __future__ import annotations

import fcntl
import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--remote-debugging-pipe", "--window-size=1280,900"]


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless chromium with one page (``with Browser(path, profile) as page:``)."""

    def __init__(self, chromium: str, profile: Path, timeout: float = 20.0) -> None:
        self.timeout = timeout
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()

        # close_fds=False: subprocess would close fds 3 and 4 after preexec_fn; Python's own
        # descriptors are not inheritable, so only the two wired here reach the browser
        def wire() -> None:  # in the child: its fd 3 reads our commands, fd 4 writes the answers
            read, write = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(read, 3)
            os.dup2(write, 4)

        self._process = subprocess.Popen([chromium, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, close_fds=False, preexec_fn=wire)
        os.close(to_child_r)
        os.close(from_child_w)
        self._out = os.fdopen(to_child_w, "wb", buffering=0)
        self._in = os.fdopen(from_child_r, "rb", buffering=0)
        self._next = 0
        self._answers: dict[int, queue.Queue] = {}
        self._lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.session: str | None = None

    # -- protocol

    def _read(self) -> None:
        buffer = b""
        while True:
            chunk = self._in.read(65536)
            if not chunk:
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message:
                    with self._lock:
                        answer = self._answers.get(message["id"])
                    if answer is not None:
                        answer.put(message)
                else:
                    self.events.append(message)

    def send(self, method: str, params: dict[str, Any] | None = None, *, page: bool = True) -> dict[str, Any]:
        with self._lock:
            self._next += 1
            number = self._next
            answer: queue.Queue = queue.Queue()
            self._answers[number] = answer
        message: dict[str, Any] = {"id": number, "method": method, "params": params or {}}
        if page and self.session:
            message["sessionId"] = self.session
        self._out.write(json.dumps(message).encode() + b"\0")
        try:
            reply = answer.get(timeout=self.timeout)
        except queue.Empty:
            raise BrowserError(f"{method}: no answer within {self.timeout} s") from None
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    # -- the page

    def __enter__(self) -> Browser:
        target = self.send("Target.createTarget", {"url": "about:blank"}, page=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 page=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.send("Browser.close", page=False)
        except (BrowserError, OSError):
            pass
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(10)
        for stream in (self._out, self._in):
            try:
                stream.close()
            except OSError:
                pass

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def url(self) -> str:
        return self.evaluate("location.href")

    def wait_for_page(self, previous_url: str | None = None) -> str:
        """Wait until a page other than ``previous_url`` (any, when None) has loaded; its URL."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            try:
                state = self.evaluate("[document.readyState, location.href]")
            except BrowserError:  # the page is being replaced
                state = None
            if state and state[0] == "complete" and state[1] != previous_url and state[1] != "about:blank":
                return state[1]
            time.sleep(0.05)
        raise BrowserError(f"no new page loaded within {self.timeout} s (still at {previous_url})")

    def goto(self, url: str) -> str:
        before = self.url()
        self.send("Page.navigate", {"url": url})
        loaded = self.wait_for_page(before if before != url else None)
        return loaded

    def click(self, selector: str) -> str:
        """Click the element ``selector`` with the mouse, as a person would
        (pressed and released at its centre), and wait for the next page."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2, r.width, r.height]; })()")
        if box is None:
            raise BrowserError(f"no element {selector!r} on {self.url()}")
        if box[2] <= 0 or box[3] <= 0:
            raise BrowserError(f"{selector!r} is not visible on {self.url()}")
        before = self.url()
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                   "clickCount": 0 if kind == "mouseMoved" else 1})
        return self.wait_for_page(before)

    def choose(self, selector: str, value: str) -> str:
        """Pick ``value`` in the ``<select>`` ``selector`` as a person would
        (its change event fires; the page's script submits the filters) and
        wait for the next page."""
        before = self.url()
        self.evaluate(f"(() => {{ const s = document.querySelector({json.dumps(selector)}); s.value = {json.dumps(value)};"
                      " s.dispatchEvent(new Event('change', {bubbles: true})); })()")
        return self.wait_for_page(before)

    def problems(self) -> list[str]:
        """What the pages threw or logged as errors or warnings (a blocked
        resource, a refused script: the Content-Security-Policy's too)."""
        found = []
        for event in self.events:
            params = event.get("params", {})
            if event.get("method") == "Runtime.exceptionThrown":
                found.append(f"exception: {params.get('exceptionDetails', {}).get('text')}")
            elif event.get("method") == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
                found.append(f"log: {params['entry'].get('text')} ({params['entry'].get('url')})")
            elif event.get("method") == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
                found.append(f"console: {params.get('args')}")
        return found
