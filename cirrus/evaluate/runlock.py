"""One writer per run: the lock ``reports/<run_id>/.lock``.

Two ``cirrus eval`` (or ``cirrus rescore``) processes with the same run id
would both run every attempt and interleave their rows.  The run store takes
this lock when it opens a run (:meth:`cirrus.evaluate.store.RunStore.open`),
so the second process is refused with :class:`RunLocked`, whose message names
the pid that holds the run and what to do.

The lock is an OS lock (``flock``) on the file, so it dies with the process
that holds it: a run killed with SIGKILL, or on a machine that crashed,
leaves a ``.lock`` file that the next process simply takes over (and says
so: :attr:`RunLock.taken_over`).  The file holds the holder's pid, host and
start time, for the message only.  It is removed when the lock is released
(``cirrus eval`` holds it until the run's outputs are written; a process
that exits releases every lock it still holds).

Within one process the lock is re-entrant, and a command can keep it past
the run store's own use with :func:`held_until_done` (``cirrus eval``: the
attempts, then the outputs written from them).  Where the file system has no ``flock`` (some
network mounts answer ENOLCK), the pid in the file decides instead: a live
process on this host keeps the run, any other holder is taken over.
"""

from __future__ import annotations

import atexit
import datetime as dt
import errno
import json
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no flock; the pid in the file decides
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = ".lock"
_NO_FLOCK = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})
_HELD: dict[Path, RunLock] = {}  # the run locks this process holds, by lock file
_KEEP: dict[Path, int] = {}  # lock files whose lock is kept past its release (held_until_done)
_GUARD = threading.Lock()


class RunLocked(ValueError):
    """The run is being written by another process (its pid named).  A
    ``ValueError``, as :class:`~cirrus.evaluate.store.RunMismatch`: the
    commands report both as a usage error (exit status 2)."""

    def __init__(self, directory: Path, holder: dict[str, Any]) -> None:
        self.directory = directory
        self.holder = holder
        pid = holder.get("pid")
        who = f"pid {pid}" if pid else "another process"
        host = holder.get("host")
        if host and host != socket.gethostname():
            who += f" on {host}"
        since = f", since {holder['started_at']}" if holder.get("started_at") else ""
        stop = f"stop it (kill {pid}) " if pid and not (host and host != socket.gethostname()) else "stop it "
        super().__init__(
            f"run {directory.name} is being written by another cirrus process ({who}{since}); wait for it to "
            f"finish, or {stop}and run the same command again to resume; or choose another --run-id "
            f"(lock file: {directory / LOCK_FILE})")


def _describe_self() -> dict[str, Any]:
    return {"pid": os.getpid(), "host": socket.gethostname(),
            "started_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def _read_holder(path: Path) -> dict[str, Any]:
    """What a lock file says of its holder (empty when unreadable)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``fd`` is still the file at ``path`` (its holder may have
    removed it between this process's open and its lock)."""
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


class RunLock:
    """The lock of one run folder (``directory / .lock``); see the module doc."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / LOCK_FILE
        self.taken_over: dict[str, Any] | None = None  # the holder of a stale lock this one replaced
        self._fd: int | None = None
        self._count = 0
        self._kept = 0  # acquisitions held for held_until_done blocks

    def acquire(self) -> RunLock:
        """Take the lock (the folder must exist), or raise :class:`RunLocked`.
        Returns the lock that holds the run in this process: this one, or
        the one taken earlier in the same process (re-entrant)."""
        key = self.path.absolute()
        with _GUARD:
            held = _HELD.get(key)
            if held is not None:
                held._count += 1
                return held
            for _ in range(5):  # a holder that released meanwhile removed the file: open it again
                if self._try_lock():
                    break
            else:
                raise RunLocked(self.directory, _read_holder(self.path))
            self._kept = _KEEP.get(key, 0)
            self._count = 1 + self._kept
            _HELD[key] = self
            return self

    def release(self) -> None:
        """Give back one acquisition; the last one removes the file and
        unlocks.  Safe to call when not held (the folder may be gone)."""
        with _GUARD:
            if self._fd is None:
                return
            self._count -= 1
            if self._count > 0:
                return
            _HELD.pop(self.path.absolute(), None)
            fd, self._fd = self._fd, None
            try:
                if _same_file(fd, self.path):
                    self.path.unlink(missing_ok=True)  # while still locked: no one takes a file about to go
            finally:
                os.close(fd)  # unlocks

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    # -- one try -------------------------------------------------------------

    def _try_lock(self) -> bool:
        """Lock the file now there; False when it was replaced meanwhile
        (try again).  Raises :class:`RunLocked` when a live process holds it."""
        previous = _read_holder(self.path)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)  # less the umask, as every file written
        try:
            if not self._lock_fd(fd, previous):
                os.close(fd)
                return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        if previous.get("pid") not in (None, os.getpid()):
            self.taken_over = previous  # a process that died holding it: its file was left behind
        data = json.dumps(_describe_self()).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        return True

    def _lock_fd(self, fd: int, previous: dict[str, Any]) -> bool:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RunLocked(self.directory, _read_holder(self.path) or previous) from None
            except OSError as exc:
                if exc.errno not in _NO_FLOCK:
                    raise
                return self._by_pid(previous) and _same_file(fd, self.path)
            return _same_file(fd, self.path)
        return self._by_pid(previous)

    def _by_pid(self, previous: dict[str, Any]) -> bool:
        """No ``flock`` here: a live holder on this host keeps the run."""
        pid, host = previous.get("pid"), previous.get("host")
        if pid not in (None, os.getpid()) and host in (None, socket.gethostname()) and _alive(pid):
            raise RunLocked(self.directory, previous)
        return True


@contextmanager
def held_until_done(directory: Path) -> Iterator[None]:
    """Keep the lock of the run in ``directory``, once this process takes
    it, until the block ends, even when the run store gives it back sooner.
    Takes nothing itself: a run refused, or never started, holds nothing."""
    key = (directory / LOCK_FILE).absolute()
    with _GUARD:
        _KEEP[key] = _KEEP.get(key, 0) + 1
    try:
        yield
    finally:
        with _GUARD:
            _KEEP[key] -= 1
            if not _KEEP[key]:
                del _KEEP[key]
            lock = _HELD.get(key)
            kept = lock is not None and lock._kept > 0
            if kept:
                lock._kept -= 1  # type: ignore[union-attr]
        if kept:
            lock.release()  # type: ignore[union-attr]


@atexit.register
def _release_all() -> None:
    """A process that exits gives its locks back (the OS would unlock them;
    this also removes their files)."""
    for lock in list(_HELD.values()):
        lock._count = 1
        lock.release()
