"""``cirrus view [WORKSPACE] [--host 127.0.0.1] [--port 0] [--open]``: the
workspace's runs in a local web application (:mod:`cirrus.view`,
docs/view.md) until Ctrl-C."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from cirrus.commands._common import console, fail, out

__all__ = ["view"]


def view(
    workspace: Annotated[Path, typer.Argument(help="Workspace folder (its reports/ and tickets/).")] = Path("."),
    host: Annotated[str, typer.Option(help="Address to listen on; anything but a loopback address shows the runs to the network.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on (0: a free one, printed).")] = 0,
    open_browser: Annotated[bool, typer.Option("--open", help="Open the page in the default browser.")] = False,
) -> None:
    """Browse the workspace's runs in a local web page until Ctrl-C: the
    leaderboard, every attempt with filters and search, one attempt's walk
    checkpoint by checkpoint, and the same attempt of two runs side by side."""
    from cirrus.view.server import ViewServer, is_loopback

    if not workspace.is_dir():
        fail(f"{workspace} is not a folder: give a workspace (tickets/, reports/)")
    try:
        server = ViewServer(workspace, host=host, port=port)
    except OSError as exc:
        fail(f"{exc}")
    if not is_loopback(host):
        console.print(f"[yellow]warning:[/] listening on {escape(host)}: other machines can read the runs")
    out.print(server.url, highlight=False)
    console.print(f"serving the runs of {escape(str(workspace))} at {server.url} (Ctrl-C stops)", highlight=False)
    if open_browser:
        import webbrowser

        webbrowser.open(server.url)
    server.serve_forever()
