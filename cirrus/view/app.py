"""The ``cirrus view`` web application (Starlette): server-side rendered
pages over one workspace's runs, with plain links and query-string filters.

=====================================================================  ==========================================
``/``                                                                  the runs: leaderboard, filters
``/runs/{run_id}``                                                     one run: its summary, links to its tasks
``/runs/{run_id}/tasks?outcome=failed&q=text&language=zh``             one row per (task, attempt), filtered
``/runs/{run_id}/tasks/{task_id}/attempts/{n}#checkpoint-3``           one attempt's walk, checkpoint by checkpoint
``/runs/{run_id}/tasks/{task_id}/attempts/{n}/compare/{other_run}``    the same attempt of two runs side by side
``POST /runs/{run_id}/tasks/{task_id}/attempts/{n}/labels``            a person's label of a judge verdict
``/static/...``                                                        the page's CSS and JS (package data)
=====================================================================  ==========================================

The one route that writes is the label form's POST: it appends one line
to ``labels/human.jsonl`` (:mod:`cirrus.judges.human_labels`) and only for
a same-origin request (:func:`_cross_site`).  Every request reads the run files anew (:mod:`cirrus.view.data`), so a run
still writing shows its new attempts on the next load.  Templates are
rendered with autoescape on; ids from the URL are only looked up among the
existing ones.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from cirrus import __version__
from cirrus.view import data
from cirrus.view.data import LabelRefused, NotFound

__all__ = ["create_app"]

STATIC_DIR = Path(__file__).resolve().parent / "static"

# what a page may do: its own stylesheet and script, nothing from elsewhere
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                               "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("cirrus.view", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.globals["version"] = __version__
    env.filters["seg"] = lambda value: quote(str(value), safe="")  # one URL path segment
    return env


def _filters(request: Request, names: tuple[str, ...]) -> dict[str, str]:
    return {name: request.query_params.get(name, "").strip()[:200] for name in names}


def _attempt_number(text: str) -> int:
    if not text.isdigit() or len(text) > 6:
        raise NotFound(f"attempt {text!r}: an attempt is a number")
    return int(text)


MAX_FORM_BYTES = 16_384  # a label form: a few ids, a verdict and a note


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _cross_site(request: Request) -> str | None:
    """Why a POST must be refused, or None: the Host header must be this
    machine's name or an IP address (a DNS name could be a rebinding attack),
    and the Origin (else the Referer) must be that very host, so that no
    other site's page can make a browser post a label."""
    host = request.headers.get("host", "")
    name = _host_name(host).lower()
    if name != "localhost":
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return f"a label is only taken at an IP address or localhost, not at host {host!r}"
    source = request.headers.get("origin") or request.headers.get("referer")
    if not source or source == "null":
        return "a label is only taken from the viewer's own page (the request has no Origin)"
    if urlsplit(source).netloc.lower() != host.lower():
        return "a label is only taken from the viewer's own page (the request comes from another origin)"
    return None


def create_app(workspace: Path) -> Starlette:
    """The app over ``workspace`` (its ``reports/`` and ``tickets/tasks.jsonl``)."""
    workspace = Path(workspace)
    env = _environment()

    def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = env.get_template(name).render(workspace=workspace.name or str(workspace), **context)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    async def runs(request: Request) -> Response:
        board = await run_in_threadpool(data.leaderboard, workspace, _filters(request, data.LEADERBOARD_FILTERS))
        return page("runs.html.j2", board=board)

    async def run(request: Request) -> Response:
        run_id = request.path_params["run_id"]

        def load() -> dict[str, Any]:
            view = data.open_run(workspace, run_id)
            summary = data.run_summary(workspace, run_id)
            rows = [view.rows[k] for k in sorted(view.rows)]
            counts = {o: sum(data.outcome(r) == o for r in rows) for o in ("success", "failed", "error")}
            others = [r for r in data.known_run_ids(workspace) if r != run_id]
            return {"run": summary, "in_progress": data.in_progress(view), "attempts": len(rows), "counts": counts,
                    "others": others}

        return page("run.html.j2", **await run_in_threadpool(load))

    async def tasks(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        filters = _filters(request, data.TASK_FILTERS)

        def load() -> dict[str, Any]:
            view = data.open_run(workspace, run_id)
            return {"run_id": run_id, "in_progress": data.in_progress(view),
                    "table": data.task_rows(workspace, view, filters)}

        return page("tasks.html.j2", **await run_in_threadpool(load))

    async def attempt(request: Request) -> Response:
        p = request.path_params
        number = _attempt_number(p["attempt"])
        view = await run_in_threadpool(data.attempt_view, workspace, p["run_id"], p["task_id"], number)
        return page("attempt.html.j2", **view)

    async def label(request: Request) -> Response:
        refused = _cross_site(request)
        if refused:
            return page("error.html.j2", status=403, message=refused, status_code=403)
        p = request.path_params
        number = _attempt_number(p["attempt"])
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
            return page("error.html.j2", status=415, message="a label is sent as a form", status_code=415)
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            return page("error.html.j2", status=413, message="the label form is too long", status_code=413)
        try:
            fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
        except (UnicodeDecodeError, ValueError):
            return page("error.html.j2", status=400, message="the form is not readable", status_code=400)
        form = {name: values[-1] for name, values in fields.items()}
        try:
            turn = await run_in_threadpool(data.add_label, workspace, p["run_id"], p["task_id"], number, form)
        except LabelRefused as exc:
            return page("error.html.j2", status=400, message=f"label not stored: {exc}", status_code=400)
        url = f"/runs/{quote(p['run_id'], safe='')}/tasks/{quote(p['task_id'], safe='')}/attempts/{number}"
        return RedirectResponse(f"{url}#checkpoint-{turn}", status_code=303, headers=SECURITY_HEADERS)

    async def compare(request: Request) -> Response:
        p = request.path_params
        number = _attempt_number(p["attempt"])
        view = await run_in_threadpool(data.compare_view, workspace, p["run_id"], p["task_id"], number,
                                       p["other_run"])
        return page("compare.html.j2", **view)

    async def not_found(request: Request, exc: Exception) -> Response:
        message = str(exc) if isinstance(exc, NotFound) else (
            exc.detail if isinstance(exc, HTTPException) else "not found")
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        return page("error.html.j2", status=status, message=message, status_code=status)

    routes = [
        Route("/", runs, name="runs"),
        Route("/runs/{run_id}", run, name="run"),
        Route("/runs/{run_id}/tasks", tasks, name="tasks"),
        Route("/runs/{run_id}/tasks/{task_id}/attempts/{attempt}", attempt, name="attempt"),
        Route("/runs/{run_id}/tasks/{task_id}/attempts/{attempt}/compare/{other_run}", compare, name="compare"),
        Route("/runs/{run_id}/tasks/{task_id}/attempts/{attempt}/labels", label, methods=["POST"], name="label"),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    return Starlette(routes=routes, exception_handlers={NotFound: not_found, 404: not_found, 405: not_found})
