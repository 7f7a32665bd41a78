"""``cirrus tools serve``: the workspace's recorded tool results as an HTTP
API (:mod:`cirrus.tools`, docs/tool-server.md), for an agent that calls its
tools itself."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cirrus.commands._common import WorkspaceOpt, console, fail

__all__ = ["tools_app"]

tools_app = typer.Typer(help="The workspace's recorded tools, for agents that call their tools themselves.",
                        no_args_is_help=True, add_completion=False)


@tools_app.command("serve")
def serve(
    workspace: WorkspaceOpt = Path("."),
    host: Annotated[str, typer.Option(help="Address to listen on; anything but a loopback address exposes the recordings to the network.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on (0: a free one, printed).")] = 8765,
) -> None:
    """Serve the workspace's recorded tool results over HTTP until Ctrl-C.

    An agent opens a session per attempt (POST /sessions), calls its tools
    (POST /sessions/ID/tools/NAME) and its calls are read back (GET
    /sessions/ID/calls): docs/tool-server.md."""
    from cirrus.evaluate.tasks import TaskFileError
    from cirrus.tools.server import ToolServer, is_loopback
    from cirrus.tools.sessions import SessionStore

    try:
        store = SessionStore(workspace)
    except TaskFileError as exc:
        fail(str(exc))
    try:
        server = ToolServer(store, host=host, port=port)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port (0: any free one)")
    if not is_loopback(host):
        console.print(f"[yellow]warning:[/] listening on {host}: other machines can read the recorded tool results")
    console.print(f"serving the tools of {store.task_count} task(s) of {workspace} at {server.url} (Ctrl-C stops)")
    server.serve_forever()
