"""``cirrus audit WORKSPACE [--raw RAW]``: a workspace scanned for personal
data and secrets by :func:`cirrus.audit.audit` (and, with ``--raw``, for the
raw input's own values by :mod:`cirrus.leak_check`); every hit on stdout
(masked), the summary on stderr.  Exit 0 clean, 1 on any hit, 2 on a usage
error or, when nothing was found, a file that could not be read."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from cirrus.audit import ALLOW_FILE
from cirrus.commands._common import EXIT_USAGE

__all__ = ["audit"]


def audit(
    workspace: Annotated[Path, typer.Argument(help="The workspace to scan (tickets/, tool_mocks/, reports/).")],
    allow: Annotated[Optional[list[str]], typer.Option(
        "--allow", metavar="REGEX",
        help=f"A value that is not personal: a regular expression searched in each value found, or a literal "
             f"value (repeatable; WORKSPACE/{ALLOW_FILE} adds one per line).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the hits as a JSON list (values masked).")] = False,
    raw: Annotated[Optional[Path], typer.Option(
        "--raw", metavar="RAW",
        help="The raw tickets the workspace was ingested from: also detect their personal data and secrets with "
             "the ingest's engine and search every file's content and name for each original value, in any "
             "letter case, digit layout, separators or escapes (loads the de-identification models).")] = None,
) -> None:
    """Scan what a workspace holds (not tickets/raw) for e-mail addresses, phone numbers, card numbers,
    keys, secrets, IP addresses, national and device identifiers, IBANs, dates of birth, addresses and
    names in non-Latin scripts (also disguised); with --raw, also for every personal value of the raw input.
    Exit 0 when clean, 1 on any hit, 2 on a usage error."""
    from cirrus.audit import AllowList, audit as audit_workspace, is_workspace

    err = Console(stderr=True, soft_wrap=True, highlight=False)  # a plain console, as it always printed
    if not workspace.is_dir():
        err.print(f"[bold red]error:[/] workspace {escape(str(workspace))} is not a folder")
        raise typer.Exit(EXIT_USAGE)
    if not is_workspace(workspace):
        err.print(f"[bold red]error:[/] {escape(str(workspace))} has no tickets/, tool_mocks/ or reports/ "
                  "folder: not a Cirrus workspace")
        raise typer.Exit(EXIT_USAGE)
    result = audit_workspace(workspace, allow or ())
    if raw is not None:
        from cirrus.ingest.readers.files import NoTicketFiles, check_input
        from cirrus.leak_check import find_leaks, raw_values

        try:
            check_input(raw)
        except FileNotFoundError:
            err.print(f"[bold red]error:[/] --raw {escape(str(raw))} does not exist")
            raise typer.Exit(EXIT_USAGE) from None
        except NoTicketFiles as exc:  # nothing to compare with: not a clean result
            err.print(f"[bold red]error:[/] --raw: {escape(str(exc))}")
            raise typer.Exit(EXIT_USAGE) from None

        err.print("audit: detecting the raw input's personal data (loading the de-identification models) ...")
        found = raw_values(raw)
        leaks, _ = find_leaks(workspace, found.values, AllowList.for_workspace(workspace, allow or ()),
                              is_word=found.is_word)
        result.hits.extend(leaks)
        err.print(f"audit: {len(found.values)} personal value(s) and secret(s) found in {escape(str(raw))}; "
                  f"{len(leaks)} found again in the workspace")
    if as_json:
        typer.echo(json.dumps([h.to_json() for h in result.hits], indent=2, ensure_ascii=False))
    else:
        for hit in result.hits:
            typer.echo(str(hit))
    for problem in result.unreadable:
        err.print(f"[bold red]error:[/] could not read {escape(problem)}")
    kinds = Counter(h.kind for h in result.hits)
    found = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    skipped = f" ({len(result.skipped)} binary skipped)" if result.skipped else ""
    unreadable = f", {len(result.unreadable)} unreadable" if result.unreadable else ""
    verdict = f"{len(result.hits)} hit(s): {found}" if result.hits else "0 hits, clean"
    err.print(f"audit: {result.scanned} file(s) scanned{skipped}{unreadable} in {escape(str(workspace))}; "
              f"{verdict}")
    raise typer.Exit(result.exit_code)
