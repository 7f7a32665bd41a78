"""The tool server's HTTP API, an ASGI app (Starlette) over a
:class:`~cirrus.tools.sessions.SessionStore`.  docs/tool-server.md is its
reference: paths, bodies, statuses.

An unrecorded call is answered ``200`` with the very text a built-in agent's
model gets as the tool message (:func:`cirrus.agents.prompts.no_recorded_result_content`):
for the agent it is a tool's answer, not a failure of the server, and an
agent whose HTTP client raises on 4xx would otherwise end its turn where a
built-in agent's model reads the error and goes on.  4xx statuses are kept
for mistakes of the agent's code (no session, a body that is not a JSON
object), 5xx for Cirrus's own failures.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cirrus import strict_json
from cirrus.agents.prompts import no_recorded_result_content
from cirrus.tools.sessions import LoggedCall, SessionError, SessionStore, ToolSession

PROTOCOL = "cirrus-tools/1"
SESSION_HEADER = "X-Cirrus-Session"
RECORDED_HEADER = "X-Cirrus-Recorded"
MAX_BODY = 1 << 20  # 1 MiB: tool arguments are small; a larger body is a mistake

access_log = logging.getLogger("cirrus.tools.access")

Endpoint = Callable[[Request], Awaitable[Response]]


class BodyTooLarge(SessionError):
    status = 413


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _refusing(handler: Endpoint) -> Endpoint:
    """``handler`` with the store's refusals answered as ``{"error": ...}``."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except SessionError as exc:
            return _error(exc.status, str(exc))

    return endpoint


async def _body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        raise BodyTooLarge(f"the body is {declared} bytes, more than the {MAX_BODY} this server reads")
    body = await request.body()
    if len(body) > MAX_BODY:
        raise BodyTooLarge(f"the body is {len(body)} bytes, more than the {MAX_BODY} this server reads")
    return body


async def _json_object(request: Request, what: str) -> dict[str, Any]:
    body = await _body(request)
    if not body.strip():
        return {}
    try:
        value = strict_json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise SessionError(f"the body of {what} is not UTF-8: send a UTF-8 JSON object") from None
    except ValueError as exc:
        reason = getattr(exc, "msg", None) or str(exc)
        raise SessionError(f"the body of {what} is not JSON ({reason}): send a JSON object") from None
    if not isinstance(value, dict):
        raise SessionError(f"the body of {what} is not a JSON object: send one, such as "
                           f'{{"task_id": "T1", "attempt": 0}}')
    return value


def _header_session(request: Request) -> str:
    session = request.headers.get(SESSION_HEADER)
    if not session:
        raise SessionError(f"no session: call POST /sessions/<id>/tools/<tool> or send the session id in the "
                           f"{SESSION_HEADER} header (start a session with POST /sessions)")
    return session


def _answer(logged: LoggedCall) -> Response:
    headers = {RECORDED_HEADER: "true" if logged.recorded else "false"}
    if logged.status == 200 and logged.recorded:
        return JSONResponse({"result": logged.result}, headers=headers)
    if logged.status == 200:  # byte for byte what a built-in agent's model is given
        return Response(no_recorded_result_content(), media_type="application/json", headers=headers)
    return JSONResponse({"error": logged.error}, status_code=logged.status, headers=headers)


def create_app(store: SessionStore) -> Starlette:
    """The ASGI app serving ``store``'s workspace (docs/tool-server.md)."""

    def base_url(request: Request) -> str:
        return str(request.base_url).rstrip("/")

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "protocol": PROTOCOL, "tasks": store.task_count,
                             "sessions": len(store)})

    async def workspace_tools(request: Request) -> Response:
        return JSONResponse({"tools": await run_in_threadpool(store.tools)})

    async def open_session(request: Request) -> Response:
        body = await _json_object(request, "POST /sessions")
        task_id = body.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            raise SessionError('POST /sessions needs "task_id": a task id of the workspace (a string), and '
                               'optionally "attempt" (0 or more) and "session" (your own id)')
        attempt = body.get("attempt", 0)
        session_id = body.get("session")
        if session_id is not None and not isinstance(session_id, str):
            raise SessionError('"session" is a string (your own session id), or left out to get one')
        session = await run_in_threadpool(store.open, task_id, attempt, session_id=session_id)
        return JSONResponse(_described(session, base_url(request)), status_code=201)

    async def list_sessions(request: Request) -> Response:
        return JSONResponse({"sessions": [session.info() for session in store.sessions()]})

    async def show_session(request: Request) -> Response:
        session = store.get(request.path_params["session"])
        return JSONResponse(_described(session, base_url(request)))

    async def end_session(request: Request) -> Response:
        session = await run_in_threadpool(store.end, request.path_params["session"])
        return JSONResponse({"session": session.id, "ended": True, "calls": len(session)})

    async def session_tools(request: Request) -> Response:
        return JSONResponse({"tools": store.get(request.path_params["session"]).tools()})

    async def call_tool(request: Request, session: ToolSession) -> Response:
        name = request.path_params["tool"]
        if not name:
            raise SessionError("no tool name: POST /sessions/<id>/tools/<tool name> with the arguments as the body")
        return _answer(session.call_json(name, await _body(request)))

    async def call_in_path(request: Request) -> Response:
        return await call_tool(request, store.get(request.path_params["session"]))

    async def call_in_header(request: Request) -> Response:
        return await call_tool(request, store.get(_header_session(request)))

    def calls(session: ToolSession, request: Request) -> Response:
        raw = request.query_params.get("since", "0")
        if not raw.isdigit():
            raise SessionError(f"since is the index of the first call wanted, 0 or more, not {raw!r}: "
                               f"pass the previous answer's next")
        listed, following = session.page(int(raw))
        return JSONResponse({"session": session.id, "calls": [call.record() for call in listed],
                             "next": following, "failure": session.failure})

    async def calls_in_path(request: Request) -> Response:
        return calls(store.get(request.path_params["session"]), request)

    async def calls_in_header(request: Request) -> Response:
        return calls(store.get(_header_session(request)), request)

    routes = [
        Route("/health", _refusing(health), methods=["GET"]),
        Route("/tools", _refusing(workspace_tools), methods=["GET"]),
        Route("/tools/{tool:path}", _refusing(call_in_header), methods=["POST"]),
        Route("/calls", _refusing(calls_in_header), methods=["GET"]),
        Route("/sessions", _refusing(open_session), methods=["POST"]),
        Route("/sessions", _refusing(list_sessions), methods=["GET"]),
        Route("/sessions/{session}", _refusing(show_session), methods=["GET"]),
        Route("/sessions/{session}", _refusing(end_session), methods=["DELETE"]),
        Route("/sessions/{session}/tools", _refusing(session_tools), methods=["GET"]),
        Route("/sessions/{session}/tools/{tool:path}", _refusing(call_in_path), methods=["POST"]),
        Route("/sessions/{session}/calls", _refusing(calls_in_path), methods=["GET"]),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        if status == 404:
            message = (f"no endpoint {request.url.path}: the tool server answers /health, /tools, /sessions and "
                       f"/sessions/<id>/tools/<tool> (docs/tool-server.md)")
        elif status == 405:
            message = f"{request.method} is not answered on {request.url.path} (docs/tool-server.md)"
        else:
            message = exc.detail if isinstance(exc, HTTPException) else "internal error"
        headers = exc.headers if isinstance(exc, HTTPException) else None
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    app = Starlette(routes=routes, middleware=[Middleware(AccessLog)],
                    exception_handlers={HTTPException: http_error})
    app.state.store = store
    return app


def _described(session: ToolSession, base: str) -> dict[str, Any]:
    return {**session.info(), "tools_url": f"{base}/sessions/{session.id}/tools/",
            "calls_url": f"{base}/sessions/{session.id}/calls"}


class AccessLog:
    """One ``METHOD path status`` line per request on ``cirrus.tools.access``
    (INFO): no query string, no header, no body, since tool arguments are
    the customer's (de-identified) data."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            access_log.info("%s %s %s", scope["method"], scope["path"], status)


__all__ = ["MAX_BODY", "PROTOCOL", "RECORDED_HEADER", "SESSION_HEADER", "AccessLog", "create_app"]
