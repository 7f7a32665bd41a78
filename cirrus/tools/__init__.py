"""The tool server: a workspace's recorded tool calls served over HTTP, so
an agent that calls its tools itself can be evaluated unchanged (issue 24
item 4, docs/tool-server.md).

* :class:`SessionStore` / :class:`ToolSession` (:mod:`cirrus.tools.sessions`):
  one session per evaluation attempt, each with its own replay state and
  call log; usable in-process.
* :func:`create_app` (:mod:`cirrus.tools.app`): the ASGI app (Starlette).
* :class:`ToolServer` / :func:`serve_tools` (:mod:`cirrus.tools.server`):
  uvicorn in the foreground or on a background thread.
"""

from cirrus.tools.app import PROTOCOL, RECORDED_HEADER, SESSION_HEADER, create_app
from cirrus.tools.server import DEFAULT_HOST, DEFAULT_PORT, ToolServer, is_loopback, serve_tools
from cirrus.tools.sessions import (
    LoggedCall,
    Replayer,
    ReplayerFactory,
    SessionConflict,
    SessionError,
    SessionSetupError,
    SessionStore,
    ToolSession,
    TooManySessions,
    UnknownSession,
    UnknownTask,
)

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "PROTOCOL", "RECORDED_HEADER", "SESSION_HEADER", "LoggedCall",
           "Replayer", "ReplayerFactory", "SessionConflict", "SessionError", "SessionSetupError", "SessionStore",
           "ToolServer", "ToolSession", "TooManySessions", "UnknownSession", "UnknownTask", "create_app",
           "is_loopback", "serve_tools"]
