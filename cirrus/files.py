"""Writing files so that a crash -- or a full disk -- never leaves a
half-written one."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

# what a write fails with when there is no room left: no space, a quota spent
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
RERUN_ADVICE = "free space and re-run"


class DiskFullError(OSError):
    """A write failed because the disk (or the user's quota) is full.

    ``str(exc)`` is the whole message for the user -- "disk full while
    writing <path>: <advice>" -- and so is ``exc.strerror``; ``exc.filename``
    is the path, ``exc.errno`` the original errno (``ENOSPC`` or
    ``EDQUOT``).  Raised by :func:`atomic_writer` (the previous file is left
    as it was, no temporary file behind) and by the run store."""

    def __init__(self, path: os.PathLike[str] | str, advice: str = RERUN_ADVICE, code: int = errno.ENOSPC) -> None:
        super().__init__(code, f"disk full while writing {path}: {advice}", str(path))
        self.path = Path(path)
        self.advice = advice

    def __str__(self) -> str:
        return str(self.strerror)

    def __reduce__(self) -> Any:  # picklable (process pools), with its own arguments
        return (type(self), (str(self.path), self.advice, self.errno))


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def disk_full(exc: OSError, path: os.PathLike[str] | str, advice: str = RERUN_ADVICE) -> DiskFullError:
    """``exc`` (a disk-full ``OSError``) as a :class:`DiskFullError` for ``path``."""
    if isinstance(exc, DiskFullError):
        return exc
    return DiskFullError(path, advice, exc.errno or errno.ENOSPC)


def _umask_now() -> int:
    """The process's umask, read without changing it where the system says
    it (Linux: ``/proc/self/status``); elsewhere set and restored at once."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0o077)  # a file created by another thread meanwhile gets no more than 0600
    os.umask(umask)
    return umask


def create_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file now: 0666 less the umask.

    Every file Cirrus writes gets this mode: a file made with
    :func:`tempfile.mkstemp` (always 0600) is ``fchmod``-ed to it before it is
    renamed into place (:func:`atomic_writer`, the report's Parquet files,
    cassettes), and a file opened with ``os.open`` is created with 0666 for
    the kernel to apply the umask (:func:`append_line`).  Read at each call,
    so a umask set after ``import cirrus`` counts."""
    return 0o666 & ~_umask_now()


@contextmanager
def atomic_writer(path: Path, *, binary: bool = False, advice: str = RERUN_ADVICE) -> Iterator[IO[Any]]:
    """Write to a temporary file beside ``path`` and rename it into place on
    success; on failure the old file (if any) is untouched and the temporary
    file removed.  A full disk raises :class:`DiskFullError` naming ``path``
    (with ``advice``).  ``binary=True`` yields a bytes file."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, create_mode())  # mkstemp's 0600 would differ from every other file written
        opened = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        with opened as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if is_disk_full(exc) and not isinstance(exc, DiskFullError):
            raise disk_full(exc, path, advice) from exc  # type: ignore[arg-type]
        raise


def append_line(path: Path, line: str, *, sync: bool = True, advice: str = RERUN_ADVICE) -> None:
    """Append ``line`` (one JSONL record, ending in a newline) to ``path``
    with ``os.write`` and fsync.  A write that fails part-way is undone (the
    file is cut back to its old length, which frees space even on a full
    disk), so no half line stays behind; should that fail too, the next
    append starts a fresh line and readers skip the cut one
    (:func:`read_jsonl`).  A full disk raises :class:`DiskFullError`."""
    data = line.encode("utf-8")
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)  # less the umask: create_mode()
    except OSError as exc:
        if is_disk_full(exc):
            raise disk_full(exc, path, advice) from exc
        raise
    try:
        start = os.fstat(fd).st_size
        if start and os.pread(fd, 1, start - 1) != b"\n":
            data = b"\n" + data  # an earlier line was cut short: leave it on its own line
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if sync:
                os.fsync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, start)
            except OSError:
                pass
            if is_disk_full(exc):
                raise disk_full(exc, path, advice) from exc
            raise
    finally:
        os.close(fd)


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Lines of a JSONL file; a last line cut short by a crash is skipped."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.endswith("\n"):
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue


def remove_stale_temps(folder: Path) -> list[Path]:
    """Delete the temporary files a killed process left in ``folder``
    (:func:`atomic_writer`'s ``.<name>.<random>.tmp``; a SIGKILL skips its
    clean-up).  Call it before writing there again: with one writer per
    workspace, none of them can belong to a live writer."""
    removed = []
    for stale in folder.glob(".*.tmp") if folder.is_dir() else ():
        if stale.is_file():
            stale.unlink(missing_ok=True)
            removed.append(stale)
    return removed
