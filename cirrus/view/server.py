"""Serve the ``cirrus view`` app with uvicorn: in the foreground (``cirrus
view``; Ctrl-C stops it) or on a background thread (tests).  The socket is
bound first (:class:`cirrus.local_server.LocalServer`), so port 0 gives a free port
whose URL is known before the first request; the default host is
127.0.0.1, reachable from this machine only."""

from __future__ import annotations

from pathlib import Path

from cirrus.local_server import DEFAULT_HOST, LocalServer, is_loopback
from cirrus.view.app import create_app

__all__ = ["DEFAULT_HOST", "ViewServer", "is_loopback"]


class ViewServer(LocalServer):
    """The view of ``workspace`` on ``host``:``port`` (0: a free port);
    ``url`` is its address.  A context manager: serves on a daemon thread
    inside the ``with`` block."""

    what = "view"
    thread_name = "cirrus-view"

    def __init__(self, workspace: Path, *, host: str = DEFAULT_HOST, port: int = 0) -> None:
        super().__init__(create_app(workspace), host=host, port=port, graceful_s=2.0)
