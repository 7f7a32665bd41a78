"""Run the tool server (uvicorn): in the foreground for ``cirrus tools
serve``, or on a background thread while an evaluation runs
(:func:`serve_tools`).

The listening socket is bound here, before uvicorn starts, so the port is
known at once (port 0: a free one) and a port in use fails in the caller's
thread with a message.  uvicorn runs with ``log_config=None`` (it leaves the
process's logging configuration alone) and without its access log: the only
per-request line is ``METHOD path status`` on ``cirrus.tools.access``
(:class:`cirrus.tools.app.AccessLog`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn

from cirrus.tools.app import create_app
from cirrus.tools.sessions import SessionStore

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765  # `cirrus tools serve`; serve_tools defaults to a free port
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


class ToolServer:
    """The tool server of ``store`` on ``host``:``port``.

    The socket is bound on construction; :meth:`start` serves on a daemon
    thread (the evaluator), :meth:`serve_forever` in the calling thread
    (``cirrus tools serve``: Ctrl-C stops it).  Used as a context manager it
    starts, then stops and ends every session.  ``url`` is the base URL."""

    def __init__(self, store: SessionStore, *, host: str = DEFAULT_HOST, port: int = 0) -> None:
        self.sessions = store
        self._socket = bind(host, port)
        self.host = host
        self.port: int = self._socket.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}"
        config = uvicorn.Config(create_app(store), log_config=None, access_log=False, log_level="warning",
                                lifespan="off", timeout_graceful_shutdown=5, server_header=False)
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self, timeout: float = START_TIMEOUT_S) -> ToolServer:
        """Serve on a background thread; returns once the server answers."""
        if self._thread is not None:
            raise RuntimeError("this tool server was already started")
        self._thread = threading.Thread(target=self._run, name=f"cirrus-tools:{self.port}", daemon=True)
        self._thread.start()
        waited = 0.0
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"the tool server on {self.url} stopped while starting: {self._error!r}")
            if waited >= timeout:
                self.stop()
                raise RuntimeError(f"the tool server on {self.url} did not start within {timeout:g} s")
            self._thread.join(0.01)
            waited += 0.01
        return self

    def _run(self) -> None:
        try:
            self._server.run(sockets=[self._socket])
        except BaseException as exc:  # noqa: BLE001 - reported by start()
            self._error = exc

    def serve_forever(self) -> None:
        """Serve in this thread until Ctrl-C (SIGINT) or SIGTERM, then end every session."""
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._socket.close()
            self.sessions.close()

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop serving (requests in flight are finished first) and end every session."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                self._server.force_exit = True
                self._thread.join(timeout)
        self._socket.close()
        self.sessions.close()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self._server.started

    def __enter__(self) -> ToolServer:
        return self.start() if self._thread is None else self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@contextlib.contextmanager
def serve_tools(workspace: Path, *, host: str = DEFAULT_HOST, port: int = 0,
                **store_options: Any) -> Iterator[ToolServer]:
    """The tool server of ``workspace`` on a background thread for the
    duration of the ``with`` block (``server.url``, ``server.sessions``).
    ``store_options`` go to :class:`SessionStore` (``index``,
    ``replayer_factory``, ``max_sessions``)."""
    server = ToolServer(SessionStore(Path(workspace), **store_options), host=host, port=port)
    with server:
        yield server


__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "ToolServer", "bind", "is_loopback", "serve_tools"]
