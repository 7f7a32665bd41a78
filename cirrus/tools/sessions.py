"""The tool server's sessions: one evaluation attempt each (docs/tool-server.md).

A :class:`ToolSession` holds one attempt's replay state (its own
:class:`~cirrus.replay.ToolReplayer`: recorded answers in order, the tool
schemas' matching rules) and the log of every call made in it, so concurrent
attempts never share either.  A :class:`SessionStore` opens sessions for the
tasks of a workspace and finds them by id.  The HTTP layer
(:mod:`cirrus.tools.app`) is a thin shell over these two classes; the
evaluator uses them in-process to open an attempt's session and to read the
calls its agent made (:meth:`ToolSession.take`).
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from cirrus import strict_json
from cirrus.evaluate.tasks import TaskIndex
from cirrus.evaluate.types import ToolCallMade
from cirrus.replay import NoRecordedResult, ToolReplayer
from cirrus.tool_matching import without_rules

# a session id chosen by the caller: usable as it is in a URL path and a header
MAX_SESSION_ID = 128
_SESSION_ID = re.compile(rf"[A-Za-z0-9._~:-]{{1,{MAX_SESSION_ID}}}")
DEFAULT_MAX_SESSIONS = 1000


class Replayer(Protocol):
    """What a session answers calls with: :class:`~cirrus.replay.ToolReplayer`
    or anything with its ``call`` (a wrapper that renames tools, say)."""

    def call(self, name: str, arguments: Any) -> Any: ...


# how a session's replayer is made from the workspace and the task
ReplayerFactory = Callable[[Path, Mapping[str, Any]], Replayer]


class SessionError(Exception):
    """A request the store refuses; ``status`` is the HTTP status that says so."""

    status = 400


class UnknownSession(SessionError, LookupError):
    status = 404

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"no session {session_id!r} on this tool server (never started, or ended with DELETE): start one with "
            f'POST /sessions and a body {{"task_id": "...", "attempt": 0}}, then call '
            f"POST /sessions/<its id>/tools/<tool name>")


class UnknownTask(SessionError, LookupError):
    status = 404


class SessionConflict(SessionError):
    status = 409


class TooManySessions(SessionError):
    status = 503


class SessionSetupError(SessionError):
    """The task's cassette cannot be read: a workspace problem, not the caller's."""

    status = 500


def iso_time(seconds: float) -> str:
    """``seconds`` since the epoch as ISO 8601 UTC with milliseconds."""
    text = datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class LoggedCall:
    """One call made in a session, and what it was answered.

    ``status`` is the HTTP status the call got: 200 (``recorded`` says whether
    the cassette held an answer), 400 (the arguments were not a JSON object:
    ``arguments`` holds the text received) or 500 (the replay itself failed:
    an infrastructure error, see :attr:`ToolSession.failure`)."""

    index: int
    name: str
    arguments: Any
    result: Any = None
    recorded: bool = False
    error: str | None = None
    time: float = 0.0  # seconds since the epoch, when the call arrived
    status: int = 200

    def tool_call(self) -> ToolCallMade:
        """The call as the walk scores it (TIA, TSA, TEV), as a built-in agent's would be."""
        return ToolCallMade(self.name, self.arguments, self.result, recorded=self.recorded, error=self.error)

    def record(self) -> dict[str, Any]:
        """The call as ``GET /sessions/{session}/calls`` lists it."""
        return {"index": self.index, "name": self.name, "arguments": self.arguments, "result": self.result,
                "recorded": self.recorded, "error": self.error, "time": iso_time(self.time), "status": self.status}


class ToolSession:
    """One attempt: its replayer and its call log.  Thread-safe."""

    def __init__(self, session_id: str, task: Mapping[str, Any], attempt: int, replayer: Replayer, *,
                 owns_replayer: bool) -> None:
        self.id = session_id
        self.task = task
        self.task_id = str(task.get("task_id"))
        self.attempt = attempt
        self.replayer = replayer
        self.created = time.time()
        # the first infrastructure error of the session (a cassette that fails
        # to replay); the evaluator turns it into the attempt's error
        self.failure: str | None = None
        self._owns_replayer = owns_replayer
        self._log: list[LoggedCall] = []
        self._taken = 0
        self._closed = False
        self._lock = threading.Lock()

    def call(self, name: str, arguments: Any) -> LoggedCall:
        """Answer tool ``name`` with ``arguments`` (a JSON value, or a JSON
        string as models send them) from the replay, and log it.  A call the
        recording does not hold is logged ``recorded=False`` with the replay's
        error; it never raises for it."""
        arrived = time.time()
        with self._lock:
            self._check_open()
            try:
                result = self.replayer.call(name, arguments)
            except NoRecordedResult as exc:
                return self._append(name, arguments, None, False, str(exc), arrived, 200)
            except Exception as exc:  # a broken cassette is not the agent's fault
                error = f"replaying tool call {name} failed: {type(exc).__name__}: {exc}"
                self.failure = self.failure or error
                return self._append(name, arguments, None, False, error, arrived, 500)
            return self._append(name, arguments, result, True, None, arrived, 200)

    def call_json(self, name: str, body: bytes) -> LoggedCall:
        """:meth:`call` with the arguments as an HTTP body: a JSON object
        (empty: no arguments).  A body that is not one is logged with status
        400 and the reason as ``error``, and not replayed."""
        arrived = time.time()
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return self.refuse(name, body.decode("utf-8", "replace"),
                               f"the arguments of tool {name} are not UTF-8: send them as a UTF-8 JSON object",
                               arrived)
        if not text.strip():
            return self.call(name, {})
        try:
            arguments = strict_json.loads(text)
        except ValueError as exc:
            reason = getattr(exc, "msg", None) or str(exc)
            return self.refuse(name, text, f"the arguments of tool {name} are not JSON ({reason}): send them as a "
                                           f'JSON object, such as {{"order_id": "A1"}} ({{}} or nothing for none)',
                               arrived)
        if not isinstance(arguments, dict):
            kind = _json_kind(arguments)
            return self.refuse(name, arguments, f"the arguments of tool {name} are {kind}, not a JSON object: send "
                                                f'them as an object, such as {{"order_id": "A1"}} ({{}} for none)',
                               arrived)
        return self.call(name, arguments)

    def refuse(self, name: str, arguments: Any, reason: str, arrived: float | None = None) -> LoggedCall:
        """Log a call that was not replayed (status 400), as the agent made it."""
        with self._lock:
            self._check_open()
            return self._append(name, arguments, None, False, reason, arrived or time.time(), 400)

    def _append(self, name: str, arguments: Any, result: Any, recorded: bool, error: str | None, arrived: float,
                status: int) -> LoggedCall:
        logged = LoggedCall(len(self._log), name, arguments, result, recorded, error, arrived, status)
        self._log.append(logged)
        return logged

    def _check_open(self) -> None:
        if self._closed:
            raise UnknownSession(self.id)

    def calls(self, since: int = 0) -> list[LoggedCall]:
        """The calls from index ``since`` on (0: all), in the order they were answered."""
        if since < 0:
            raise ValueError(f"since must be 0 or more, not {since}")
        with self._lock:
            return self._log[since:]

    def page(self, since: int = 0) -> tuple[list[LoggedCall], int]:
        """The calls from index ``since`` on and the cursor to pass next time
        (the number of calls logged so far), read together."""
        if since < 0:
            raise ValueError(f"since must be 0 or more, not {since}")
        with self._lock:
            return self._log[since:], len(self._log)

    def take(self) -> list[ToolCallMade]:
        """The calls made since the last :meth:`take`, as the walk scores
        them: what the evaluator reads after each agent turn."""
        with self._lock:
            taken, self._taken = self._log[self._taken:], len(self._log)
        return [call.tool_call() for call in taken]

    def __len__(self) -> int:
        with self._lock:
            return len(self._log)

    def tools(self) -> list[dict[str, Any]]:
        """The task's own tool schemas, as agents are sent them."""
        tools = self.task.get("tools")
        return without_rules(list(tools)) if isinstance(tools, list) else []

    def info(self) -> dict[str, Any]:
        return {"session": self.id, "task_id": self.task_id, "attempt": self.attempt, "calls": len(self),
                "created": iso_time(self.created), "failure": self.failure}

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """End the session: later calls get :class:`UnknownSession`; a replayer
        the session made itself is closed (one passed in stays open)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        close = getattr(self.replayer, "close", None)
        if self._owns_replayer and callable(close):
            close()


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, str):
        return "a JSON string"
    if isinstance(value, bool):
        return "a JSON boolean"
    if value is None:
        return "JSON null"
    return "a JSON number"


def check_session_id(session_id: str) -> str:
    """A caller's own session id: 1 to 128 letters, digits and ``.``, ``_``,
    ``~``, ``:``, ``-`` (so it can stand in a URL path and a header as it
    is), not only dots."""
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id) or not session_id.strip("."):
        raise SessionError(f"a session id is 1 to {MAX_SESSION_ID} letters, digits, '.', '_', '~', ':' or '-' "
                           f"(not only dots), not {session_id!r}: leave it out to get one")
    return session_id


class SessionStore:
    """The sessions of one workspace's tool server.

    ``index`` is the workspace's :class:`~cirrus.evaluate.tasks.TaskIndex`
    (scanned here when not given: the eval passes the one it runs);
    ``replayer_factory`` makes a session's replayer from the workspace and the
    task (default :meth:`ToolReplayer.for_task`, with the task schemas'
    ``x-cirrus-match`` rules).  At most ``max_sessions`` are open at once:
    a session stays until it is ended (:meth:`end`), so a caller that never
    ends its sessions is told so instead of filling the memory.
    """

    def __init__(self, workspace: Path, *, index: TaskIndex | None = None,
                 replayer_factory: ReplayerFactory | None = None,
                 max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        self.workspace = Path(workspace)
        self.index = index if index is not None else TaskIndex.scan(self.workspace)
        self._refs = {ref.task_id: ref for ref in self.index.refs}
        self._factory: ReplayerFactory = replayer_factory or ToolReplayer.for_task
        self.max_sessions = max_sessions
        self._sessions: dict[str, ToolSession] = {}
        self._lock = threading.Lock()
        self._tools: list[dict[str, Any]] | None = None
        self._tools_lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    @property
    def task_count(self) -> int:
        return len(self._refs)

    def task(self, task_id: str) -> dict[str, Any]:
        """The task ``task_id`` of the workspace, read from its task file."""
        ref = self._refs.get(task_id)
        if ref is None:
            raise UnknownTask(f"task {task_id!r} is not among the {len(self._refs)} tasks of {self.index.path}: "
                              f"use a task_id from that file")
        try:
            return self.index.load(ref)
        except (OSError, ValueError) as exc:  # TaskFileError: the file changed since the server started
            raise SessionSetupError(str(exc)) from exc

    def open(self, task: str | Mapping[str, Any], attempt: int = 0, *, replayer: Replayer | None = None,
             session_id: str | None = None) -> ToolSession:
        """A new session for ``task`` (a task id of the workspace, or the task
        itself) and ``attempt``.  ``replayer``: the attempt's own (the
        evaluator passes the walk's, so its rewinds and seeks apply; it is not
        closed with the session); default a fresh one from the factory.
        ``session_id``: the caller's id (:func:`check_session_id`); default an
        opaque one."""
        if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
            raise SessionError(f"attempt is a whole number, 0 or more, not {attempt!r}")
        if session_id is not None:
            check_session_id(session_id)
            with self._lock:
                if session_id in self._sessions:
                    raise SessionConflict(f"session {session_id!r} is already open: end it with DELETE "
                                          f"/sessions/<id> first, or leave the id out to get a new one")
        task = self.task(task) if isinstance(task, str) else task
        owns = replayer is None
        if replayer is None:
            replayer = self._make_replayer(task)
        refused: SessionError | None = None
        with self._lock:
            if len(self._sessions) >= self.max_sessions:
                refused = TooManySessions(f"{len(self._sessions)} sessions are open, the most this tool server "
                                          f"keeps: end finished ones with DELETE /sessions/<id>")
            elif session_id is not None and session_id in self._sessions:
                refused = SessionConflict(f"session {session_id!r} is already open: end it with DELETE "
                                          f"/sessions/<id> first, or leave the id out to get a new one")
            else:
                while session_id is None or session_id in self._sessions:
                    session_id = secrets.token_urlsafe(12)
                session = self._sessions[session_id] = ToolSession(session_id, task, attempt, replayer,
                                                                   owns_replayer=owns)
        if refused is not None:
            close = getattr(replayer, "close", None)
            if owns and callable(close):
                close()
            raise refused
        return session

    def _make_replayer(self, task: Mapping[str, Any]) -> Replayer:
        try:
            return self._factory(self.workspace, task)
        except (OSError, ValueError) as exc:  # CassetteError is a ValueError
            raise SessionSetupError(f"the recorded tool calls of task {task.get('task_id')!r} cannot be loaded: "
                                    f"{exc}") from exc

    def get(self, session_id: str) -> ToolSession:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise UnknownSession(session_id)
        return session

    def sessions(self) -> list[ToolSession]:
        with self._lock:
            return list(self._sessions.values())

    def end(self, session_id: str) -> ToolSession:
        """End session ``session_id`` and forget it; it is returned, its call
        log still readable in-process."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is None:
            raise UnknownSession(session_id)
        session.close()
        return session

    def close(self) -> None:
        """End every session."""
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.close()

    def tools(self) -> list[dict[str, Any]]:
        """Every tool the workspace knows: the union of its tasks' ``tools``
        by function name (the first schema in file order for a name), as
        agents are sent them (no ``x-cirrus-match``).  Read once."""
        with self._tools_lock:
            if self._tools is None:
                seen: dict[str, dict[str, Any]] = {}
                for task in self.index:
                    for tool in task.get("tools") or ():
                        function = tool.get("function") if isinstance(tool, Mapping) else None
                        name = function.get("name") if isinstance(function, Mapping) else None
                        if isinstance(name, str) and name not in seen:
                            seen[name] = without_rules(tool)
                self._tools = list(seen.values())
            return self._tools


__all__ = ["LoggedCall", "Replayer", "ReplayerFactory", "SessionConflict", "SessionError", "SessionSetupError",
           "SessionStore", "ToolSession", "TooManySessions", "UnknownSession", "UnknownTask", "check_session_id",
           "iso_time"]
