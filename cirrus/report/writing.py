"""Where a report goes and how its files are written: the output folder
(:func:`default_out_dir`), the names of the files beside the tables, the
atomic Parquet writer every report table goes through
(:func:`write_parquet`), the page (:func:`write_page`), and the one line a
failed write is told with (:func:`write_error`).

Every file is written to a temporary file and renamed into place, so a full
disk leaves each report file whole (the old one or the new one, never a cut
one).
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cirrus.workspace import REPORTS_DIR

if TYPE_CHECKING:
    import polars as pl

__all__ = ["COMPARE_DIR", "HTML_FILE", "REPORT_DISK_FULL_ADVICE", "REPORT_FILE", "STATS_FILE", "default_out_dir",
           "write_error", "write_page", "write_parquet"]

REPORT_FILE = "report.json"
HTML_FILE = "report.html"
STATS_FILE = "stats.json"  # the text of `cirrus stats`'s reports/stats.json, for the report's workspace
# what a full disk's error says to do (cirrus.files.DiskFullError)
REPORT_DISK_FULL_ADVICE = "free space and run cirrus report again; the runs themselves are untouched"
COMPARE_DIR = "_compare"
_MAX_DIR_NAME = 120


def default_out_dir(workspace: Path, run_ids: Sequence[str]) -> Path:
    """``reports/<run_id>/report/`` for one run; ``reports/_compare/<a>+<b>...``
    for several (a long list is shortened to ``<a>+<n>-more-<hash>``)."""
    reports = workspace / REPORTS_DIR
    if len(run_ids) == 1:
        return reports / run_ids[0] / "report"
    name = "+".join(run_ids)
    if len(name) > _MAX_DIR_NAME:
        digest = hashlib.sha256("\0".join(run_ids).encode()).hexdigest()[:10]
        name = f"{run_ids[0][:60]}+{len(run_ids) - 1}-more-{digest}"
    return reports / COMPARE_DIR / name


def write_parquet(frame: pl.DataFrame, path: Path, table: str) -> None:
    """Write atomically, with the schema version also in the file's metadata.
    The table is encoded in memory (report tables are small) and written
    with :func:`~cirrus.files.atomic_writer`: a full disk is a
    :class:`~cirrus.files.DiskFullError` naming the file, the old file kept."""
    from cirrus.files import atomic_writer
    from cirrus.report.schema import SCHEMA_VERSION

    buffer = io.BytesIO()
    frame.write_parquet(buffer, metadata={"cirrus.report.schema_version": str(SCHEMA_VERSION),
                                          "cirrus.report.table": table})
    with atomic_writer(path, binary=True, advice=REPORT_DISK_FULL_ADVICE) as out:
        out.write(buffer.getbuffer())


def write_page(text: str, out_dir: Path) -> Path:
    """Write the page ``out_dir/report.html`` (atomically) and return its path."""
    from cirrus.files import atomic_writer

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / HTML_FILE
    with atomic_writer(path, advice=REPORT_DISK_FULL_ADVICE) as handle:
        handle.write(text)
    return path


def write_error(exc: OSError) -> str:
    """The line ``cirrus report`` exits with when it cannot write (exit
    status 1): a full disk's :class:`~cirrus.files.DiskFullError` names the
    file and what to do; another error its reason and file."""
    from cirrus.files import DiskFullError, disk_full, is_disk_full

    if is_disk_full(exc) and not isinstance(exc, DiskFullError):
        exc = disk_full(exc, exc.filename or "the report folder", REPORT_DISK_FULL_ADVICE)
    if isinstance(exc, DiskFullError):
        return f"could not write the report: {exc}"
    where = f" ({exc.filename})" if exc.filename else ""
    return f"could not write the report: {exc.strerror or exc}{where}; the runs themselves are untouched"
