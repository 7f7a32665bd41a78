"""``cirrus audit WORKSPACE``: a last line of defence against personal data in
what Cirrus wrote.

It reads every file Cirrus writes into a workspace -- ``tickets/tasks.jsonl``
and ``tickets/manifest.json`` (the raw input in ``tickets/raw`` and the
knowledge folder are inputs and are not read), every cassette under
``tool_mocks/`` and everything under ``reports/`` (JSONL, JSON, Parquet, HTML,
SVG, Markdown, CSV) -- and looks for e-mail addresses, phone numbers, payment
card numbers, cloud and API keys and IP addresses.  Values Cirrus masked keep
a ``*`` (``ja***@g***.com``, ``157****3190``) and cannot match.  A hit is shown
masked, with its file, line (Parquet: row and column) and kind, so the audit
output is itself safe to keep in CI logs.  Loopback, unspecified and
documentation addresses (RFC 5737, RFC 3849) and netmasks are not hits;
anything else that is not personal goes in the allow list.  Exit status: 0 clean, 1 any hit, 2
usage error.

Files are streamed line by line (Parquet row group by row group), so a
workspace of any size is read in constant memory.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

ALLOW_FILE = ".cirrus-audit-allow"
TEXT_SUFFIXES = {".jsonl", ".json", ".yaml", ".yml", ".html", ".htm", ".svg", ".md", ".txt", ".csv", ".log", ".toml"}
MARKUP_SUFFIXES = {".html", ".htm", ".svg"}
_DRAWING_ATTRIBUTES = {
    "d", "points", "transform", "viewbox", "x", "y", "x1", "x2", "y1", "y2", "dx", "dy", "width", "height", "cx", "cy",
    "r", "rx", "ry", "style", "class", "id", "fill", "stroke", "stroke-width", "stroke-dasharray",
    "stroke-dashoffset", "font-size", "clip-path", "xlink:href", "offset", "opacity", "version", "xmlns",
    "xmlns:xlink",
}
PHONE_REGIONS = ("US", "GB", "CN", "DE", "FR", "IT", "ES", "NL", "BE", "CH", "IN", "CA", "AU", "SG", "JP")


@dataclass(frozen=True)
class Hit:
    file: str
    line: int  # 1-based line; for Parquet the row
    kind: str
    shown: str  # the value, masked
    column: str | None = None  # Parquet only


# -- patterns -------------------------------------------------------------------------

_EMAIL = re.compile(r"(?<![\w.%+*-])[A-Za-z0-9][A-Za-z0-9._%+-]*@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,24}(?![\w*-])")
_CARD = re.compile(r"(?<![\w*.-])\d(?:[ -]?\d){12,18}(?![\w*-]|\.\d)")
_KEYS = re.compile(
    r"(?<![A-Za-z0-9])(?:(?:AKIA|ASIA)[0-9A-Z]{16}|LTAI[0-9A-Za-z]{12,30}|sk-(?:proj-)?[A-Za-z0-9_-]{20,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}|xox[abpr]-[A-Za-z0-9-]{10,})(?![A-Za-z0-9])"
    r"|-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----"
)
_IPV4 = re.compile(r"(?<![\w.*])(?:\d{1,3}\.){3}\d{1,3}(?![\w*]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:*])(?=[0-9A-Fa-f:]*:[0-9A-Fa-f:]*:)[0-9A-Fa-f:]{2,39}(?![\w:*])")
# digits with the separators phone numbers are written with; not part of a
# longer word, a masked value (``*``), a decimal number (``84.0553763440``)
# or a time of day (``2025-03-05 11:02:15``)
_DATE = re.compile(r"(?:19|20)\d\d-?(?:0[1-9]|1[0-2])-?(?:0[1-9]|[12]\d|3[01])")  # 2025-03-05, 20250305
_PHONE_CANDIDATE = re.compile(r"(?<![\w*.,:+])(?:\+\d|\(\d|\d)[\d ()-]{5,18}\d(?![\w*]|[.,:]\d)")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


# reserved for documentation and examples (RFC 5737, RFC 3849): nobody's address
_DOCUMENTATION_NETS = tuple(ipaddress.ip_network(n) for n in
                            ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"))


def _ip_is_personal(text: str) -> bool:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    if ip.is_unspecified or ip.is_loopback or any(ip in net for net in _DOCUMENTATION_NETS):
        return False
    if ip.version == 4 and text.startswith("255."):  # a netmask
        return False
    return True


def _phones(text: str) -> Iterator[tuple[str, str]]:
    """Runs of digits that ``phonenumbers`` finds as a valid number of one
    of the regions (or, with a ``+``, of any country).  Candidates are cut out
    by a regular expression first, and each distinct one is asked about once:
    running the matcher over whole lines is far too slow for large workspaces."""
    for match in _PHONE_CANDIDATE.finditer(text):
        raw = match.group().strip()
        if sum(ch.isdigit() for ch in raw) >= 8 and not _DATE.fullmatch(raw):
            found = _phone_in(raw)
            if found is not None:
                yield "phone", found


@functools.lru_cache(maxsize=1 << 16)
def _phone_in(candidate: str) -> str | None:
    import phonenumbers

    regions = ("ZZ",) if candidate.startswith("+") else PHONE_REGIONS  # ZZ: the number carries its country
    for region in regions:
        # the matcher, not parse(): it also refuses dates, timestamps and odd groupings
        found = next(iter(phonenumbers.PhoneNumberMatcher(candidate, region, leniency=phonenumbers.Leniency.VALID)),
                     None)
        if found is not None:
            return found.raw_string
    return None


def scan_text(text: str) -> list[tuple[str, str]]:
    """The (kind, value) pairs of personal data or secrets in ``text``."""
    found: list[tuple[str, str]] = []
    found += [("email", m.group()) for m in _EMAIL.finditer(text)]
    found += [("key", m.group()) for m in _KEYS.finditer(text)]
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if 13 <= len(digits) <= 19 and len(set(digits)) > 1 and _luhn(digits):
            found.append(("card", m.group()))
    found += [("ip", m.group()) for m in _IPV4.finditer(text) if _ip_is_personal(m.group())]
    found += [("ip", m.group()) for m in _IPV6.finditer(text) if _ip_is_personal(m.group())]
    cards = {value for kind, value in found if kind == "card"}
    found += [(kind, value) for kind, value in _phones(text) if value not in cards]
    return found


def mask(value: str) -> str:
    """Enough of ``value`` to find it, not enough to read it."""
    keep = 2 if len(value) > 6 else 1
    return value[:keep] + "***" + (value[-2:] if len(value) > 10 else "")


# -- files ------------------------------------------------------------------------------

def written_files(workspace: Path) -> Iterator[Path]:
    """The files Cirrus writes in ``workspace``, in a stable order."""
    tickets = workspace / "tickets"
    if tickets.is_dir():
        yield from sorted(p for p in tickets.iterdir() if p.is_file() and not p.name.startswith("."))
    for folder in ("tool_mocks", "reports"):
        root = workspace / folder
        if root.is_dir():
            yield from sorted(p for p in root.rglob("*") if p.is_file()
                              and not any(part.startswith(".") for part in p.relative_to(workspace).parts))


def _allowed(value: str, allow: list[re.Pattern[str]]) -> bool:
    return any(pattern.search(value) for pattern in allow)


def scan_file(path: Path, shown_as: str, allow: list[re.Pattern[str]]) -> Iterator[Hit]:
    if path.suffix == ".parquet":
        yield from _scan_parquet(path, shown_as, allow)
        return
    suffix = path.suffix.lower()
    if suffix not in TEXT_SUFFIXES:
        return
    with path.open(encoding="utf-8", errors="replace") as handle:
        chunks = _markup_chunks(handle) if suffix in MARKUP_SUFFIXES else enumerate(handle, 1)
        for number, text in chunks:
            for kind, value in scan_text(_unescaped(text)):
                if not _allowed(value, allow):
                    yield Hit(shown_as, number, kind, mask(value))


def _markup_chunks(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """The text and the meaningful attribute values of an HTML or SVG file,
    with their line numbers; drawing data (path coordinates, sizes, styles)
    is left out, its runs of numbers are not phone numbers."""
    from html.parser import HTMLParser

    pending: list[tuple[int, str]] = []

    class Reader(HTMLParser):
        skip = 0

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "style":
                self.skip += 1
            line = self.getpos()[0]
            pending.extend((line, value) for name, value in attrs if value and name not in _DRAWING_ATTRIBUTES)

        def handle_endtag(self, tag: str) -> None:
            if tag == "style" and self.skip:
                self.skip -= 1

        def handle_data(self, data: str) -> None:
            if not self.skip and data.strip():
                pending.append((self.getpos()[0], data))

    reader = Reader(convert_charrefs=True)
    for line in lines:
        reader.feed(line)
        yield from pending
        pending.clear()
    reader.close()
    yield from pending


def _unescaped(line: str) -> str:
    """JSON escapes undone (``\\u0040`` is an ``@``), so escaping cannot hide a value."""
    if "\\u" not in line:
        return line
    return re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), line)


def _scan_parquet(path: Path, shown_as: str, allow: list[re.Pattern[str]], batch: int = 10_000) -> Iterator[Hit]:
    import polars as pl

    schema = pl.read_parquet_schema(path)
    columns = [name for name, dtype in schema.items() if dtype == pl.Utf8]
    if not columns:
        return
    frame = pl.scan_parquet(path).select(columns)
    start = 0
    while True:
        part = frame.slice(start, batch).collect()
        if part.height == 0:
            return
        for name in columns:
            for offset, value in enumerate(part.get_column(name).to_list()):
                for kind, found in scan_text(value or ""):
                    if not _allowed(found, allow):
                        yield Hit(shown_as, start + offset + 1, kind, mask(found), column=name)
        start += part.height


def audit(workspace: Path, allow: Iterable[str] = ()) -> tuple[int, list[Hit]]:
    """Scan ``workspace``: (files read, hits).  ``allow`` holds regular
    expressions of values that are not personal (a support address of your
    own, a documentation IP range); the workspace's ``.cirrus-audit-allow``
    (one per line, ``#`` comments) adds to them."""
    patterns = list(allow)
    allow_file = workspace / ALLOW_FILE
    if allow_file.is_file():
        patterns += [line.strip() for line in allow_file.read_text(encoding="utf-8").splitlines()
                     if line.strip() and not line.lstrip().startswith("#")]
    compiled = [re.compile(p) for p in patterns]
    files = 0
    found: list[Hit] = []
    for path in written_files(workspace):
        files += 1
        found.extend(scan_file(path, path.relative_to(workspace).as_posix(), compiled))
    return files, found


# -- command ---------------------------------------------------------------------------

def register(app: typer.Typer) -> None:
    """Add ``audit`` to the ``cirrus`` command line."""

    @app.command("audit")
    def audit_command(
        workspace: Annotated[Path, typer.Argument(help="The workspace to scan (tickets/, tool_mocks/, reports/).")],
        allow: Annotated[Optional[list[str]], typer.Option(
            "--allow", help=f"Regular expression of a value that is not personal (repeatable; also read from "
                            f"WORKSPACE/{ALLOW_FILE}, one per line).")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the hits as JSON (values masked).")] = False,
    ) -> None:
        """Scan what Cirrus wrote in a workspace for e-mail addresses, phone numbers, card numbers, keys and IP addresses; exit 1 on any hit."""
        from rich.console import Console
        from rich.markup import escape

        err = Console(stderr=True, soft_wrap=True)
        if not workspace.is_dir():
            err.print(f"[bold red]error:[/] workspace {escape(str(workspace))} is not a folder")
            raise typer.Exit(2)
        try:
            files, hits = audit(workspace, allow or ())
        except re.error as exc:
            err.print(f"[bold red]error:[/] an allow pattern is not a regular expression: {escape(str(exc))}")
            raise typer.Exit(2) from None
        if as_json:
            typer.echo(json.dumps({"files": files, "hits": [asdict(h) for h in hits]}, indent=2))
        else:
            for hit in hits:
                where = f"{hit.file}:{hit.line}" + (f" [{hit.column}]" if hit.column else "")
                typer.echo(f"{where}: {hit.kind} {hit.shown}")
            verdict = "clean" if not hits else f"{len(hits)} possible personal value(s) or secret(s)"
            err.print(f"audit: {files} file(s) read in {escape(str(workspace))}: {verdict}")
        raise typer.Exit(1 if hits else 0)
