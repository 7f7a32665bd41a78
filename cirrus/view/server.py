"""Serve the ``cirrus view`` app with uvicorn: in the foreground (``cirrus
view``; Ctrl-C stops it) or on a background thread (tests).  The socket is
bound first (:func:`cirrus.tools.server.bind`), so port 0 gives a free port
whose URL is known before the first request; the default host is
127.0.0.1, reachable from this machine only."""

from __future__ import annotations

import threading
from pathlib import Path

import uvicorn

from cirrus.tools.server import bind, is_loopback
from cirrus.view.app import create_app

__all__ = ["DEFAULT_HOST", "ViewServer", "is_loopback"]

DEFAULT_HOST = "127.0.0.1"
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0


class ViewServer:
    """The view of ``workspace`` on ``host``:``port`` (0: a free port);
    ``url`` is its address.  A context manager: serves on a daemon thread
    inside the ``with`` block."""

    def __init__(self, workspace: Path, *, host: str = DEFAULT_HOST, port: int = 0) -> None:
        self._socket = bind(host, port)
        self.host = host
        self.port: int = self._socket.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}"
        config = uvicorn.Config(create_app(workspace), log_config=None, access_log=False, log_level="warning",
                                lifespan="off", timeout_graceful_shutdown=2, server_header=False)
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self, timeout: float = START_TIMEOUT_S) -> ViewServer:
        """Serve on a background thread; returns once uvicorn has started."""
        if self._thread is not None:
            raise RuntimeError("this view server was already started")
        self._thread = threading.Thread(target=self._run, name=f"cirrus-view:{self.port}", daemon=True)
        self._thread.start()
        waited = 0.0
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"the view on {self.url} stopped while starting: {self._error!r}")
            if waited >= timeout:
                self.stop()
                raise RuntimeError(f"the view on {self.url} did not start within {timeout:g} s")
            self._thread.join(0.01)
            waited += 0.01
        return self

    def _run(self) -> None:
        try:
            self._server.run(sockets=[self._socket])
        except BaseException as exc:  # noqa: BLE001 - reported by start()
            self._error = exc

    def serve_forever(self) -> None:
        """Serve in this thread until Ctrl-C (SIGINT) or SIGTERM."""
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._socket.close()

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                self._server.force_exit = True
                self._thread.join(timeout)
        self._socket.close()

    def __enter__(self) -> ViewServer:
        return self.start() if self._thread is None else self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
