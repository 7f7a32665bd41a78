"""Run the tool server (uvicorn): in the foreground for ``cirrus tools
serve``, or on a background thread while an evaluation runs
(:func:`serve_tools`).

The socket, threads and uvicorn settings are :class:`cirrus.local_server.LocalServer`'s
(shared with ``cirrus view``); without uvicorn's access log, the only
per-request line is ``METHOD path status`` on ``cirrus.tools.access``
(:class:`cirrus.tools.app.AccessLog`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cirrus.local_server import DEFAULT_HOST, LocalServer, bind, is_loopback
from cirrus.tools.app import create_app
from cirrus.tools.sessions import SessionStore

DEFAULT_PORT = 8765  # `cirrus tools serve`; serve_tools defaults to a free port


class ToolServer(LocalServer):
    """The tool server of ``store`` on ``host``:``port``.

    The socket is bound on construction; :meth:`start` serves on a daemon
    thread (the evaluator), :meth:`serve_forever` in the calling thread
    (``cirrus tools serve``: Ctrl-C stops it).  Used as a context manager it
    starts, then stops and ends every session.  ``url`` is the base URL."""

    what = "tool server"
    thread_name = "cirrus-tools"

    def __init__(self, store: SessionStore, *, host: str = DEFAULT_HOST, port: int = 0) -> None:
        self.sessions = store
        super().__init__(create_app(store), host=host, port=port, graceful_s=5.0)

    def closed(self) -> None:
        """Every session ends with the server."""
        self.sessions.close()


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
