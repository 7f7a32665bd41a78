"""A local HTTP server for an ASGI app (uvicorn): in the foreground until
Ctrl-C, or on a background thread for the length of a ``with`` block.

Shared by the tool server (:mod:`cirrus.tools.server`) and ``cirrus view``
(:mod:`cirrus.view.server`).  The listening socket is bound on construction,
before uvicorn starts, so the port is known at once (port 0: a free one) and
a port in use fails in the caller's thread with a message.  uvicorn runs with
``log_config=None`` (it leaves the process's logging configuration alone),
without its access log and without a ``Server`` header.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from typing import Any

import uvicorn

DEFAULT_HOST = "127.0.0.1"
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (0: a free port), not yet listening."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise OSError(f"cannot listen on {host!r}: not an address of this machine ({exc.strerror})") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port} ({exc.strerror}): choose another port, or 0 for a "
                      f"free one") from None
    return sock


class LocalServer:
    """``app`` served on ``host``:``port``; ``url`` is its base URL and
    ``what`` names it in errors and the thread's name.  Subclasses add what
    stopping must also end (:meth:`closed`)."""

    what = "server"
    thread_name = "cirrus-server"

    def __init__(self, app: Any, *, host: str = DEFAULT_HOST, port: int = 0, graceful_s: float = 5.0) -> None:
        self._socket = bind(host, port)
        self.host = host
        self.port: int = self._socket.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}"
        config = uvicorn.Config(app, log_config=None, access_log=False, log_level="warning", lifespan="off",
                                timeout_graceful_shutdown=graceful_s, server_header=False)
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def closed(self) -> None:
        """Called once the server has stopped serving (override to end what it served)."""

    def start(self, timeout: float = START_TIMEOUT_S) -> Any:
        """Serve on a background thread; returns once uvicorn has started."""
        if self._thread is not None:
            raise RuntimeError(f"this {self.what} was already started")
        self._thread = threading.Thread(target=self._run, name=f"{self.thread_name}:{self.port}", daemon=True)
        self._thread.start()
        waited = 0.0
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"the {self.what} on {self.url} stopped while starting: {self._error!r}")
            if waited >= timeout:
                self.stop()
                raise RuntimeError(f"the {self.what} on {self.url} did not start within {timeout:g} s")
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
            self.closed()

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop serving (requests in flight are finished first)."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                self._server.force_exit = True
                self._thread.join(timeout)
        self._socket.close()
        self.closed()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self._server.started

    def __enter__(self) -> Any:
        return self.start() if self._thread is None else self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


__all__ = ["DEFAULT_HOST", "LocalServer", "START_TIMEOUT_S", "STOP_TIMEOUT_S", "bind", "is_loopback"]
