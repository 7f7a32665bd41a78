"""A content-addressed cache of model answers (judge and fluency calls), so
re-scoring and resuming a run never pay for the same question twice.

The key is the SHA-256 of the base URL and the canonical JSON of the request
body (model, messages, tools, every parameter); the API key is never part of
a request body, so it is neither in the key nor anywhere in the file.  Values
are the answers as JSON (:meth:`cirrus.llm.client.ChatResult.to_cache`).

Storage is one SQLite file in the cache directory, in WAL mode, safe to
share between threads and processes.  Writes are not fsync'ed one by one
(``synchronous=NORMAL``): a crash loses at most the last answers, which are
then simply asked again.  The agent's own calls are never cached: every
attempt of a task must be an independent sample.

A cache file that is not a database, or whose pages are damaged (a disk
that failed, a file cut short by a copy), is found when the cache opens
(``PRAGMA quick_check``, a fraction of a second for hundreds of megabytes):
it is moved aside to ``<name>.corrupt-<UTC time>`` (its ``-wal`` and ``-shm``
files with it), a ``RuntimeWarning`` names both paths, and an empty cache
takes its place: a cache only saves calls, so the run goes on and its
answers are asked again.  :attr:`ResponseCache.set_aside` is the moved file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sqlite3
import threading
import time
import warnings
from pathlib import Path
from typing import Any

CACHE_VERSION = "cirrus-llm-cache-1"
# what SQLite answers for a file that is no database, or one whose pages are damaged
CORRUPT_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})


class CorruptCache(sqlite3.DatabaseError):
    """``PRAGMA quick_check`` found damage (its first finding is the message)."""


def is_corrupt(exc: BaseException) -> bool:
    """Whether ``exc`` says the database file is damaged or not a database."""
    return isinstance(exc, CorruptCache) or (
        isinstance(exc, sqlite3.DatabaseError) and getattr(exc, "sqlite_errorcode", None) in CORRUPT_CODES)


class ResponseCache:
    FILENAME = "llm-cache.sqlite3"

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / self.FILENAME
        self.set_aside: Path | None = None  # where a corrupt cache file was moved
        self._lock = threading.Lock()
        try:
            self._db = self._connect()
        except sqlite3.DatabaseError as exc:
            if not is_corrupt(exc):
                raise
            self.set_aside = self._move_aside()
            warnings.warn(f"the response cache {self.path} is damaged ({exc}): moved it aside to {self.set_aside} "
                          "and started an empty cache; the answers it held are asked again (delete the moved "
                          "file once you no longer need it)", RuntimeWarning, stacklevel=2)
            self._db = self._connect()

    def _connect(self) -> sqlite3.Connection:
        """Open the file (created if missing) and check it: a damaged one
        raises a ``DatabaseError`` that :func:`is_corrupt` recognises."""
        # sqlite would create the file 0644 whatever the umask (its -wal and
        # -shm files copy the database's mode): create it as open() does
        self.path.touch(exist_ok=True)
        db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"
            )
            found = db.execute("PRAGMA quick_check(1)").fetchone()
            if found is None or found[0] != "ok":
                raise CorruptCache(found[0] if found else "quick_check gave no answer")
        except BaseException:
            db.close()
            raise
        return db

    def _move_aside(self) -> Path:
        """Rename the damaged file (and its -wal / -shm) to
        ``<name>.corrupt-<UTC time>``; the new name."""
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            source = Path(f"{self.path}{suffix}")
            if source.exists():
                os.replace(source, f"{target}{suffix}")
        return target

    @staticmethod
    def key(base_url: str, body_json: str) -> str:
        """The key of a request: ``body_json`` must be canonical JSON
        (:func:`cirrus.ingest.cassettes.canonical_json`) of the body."""
        digest = hashlib.sha256()
        for part in (CACHE_VERSION, base_url.rstrip("/"), body_json):
            digest.update(part.encode("utf-8"))
            digest.update(b"\0")
        return digest.hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            value = json.loads(row[0])
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO answers (key, value, created) VALUES (?, ?, ?)", (key, text, time.time())
            )

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM answers WHERE key = ?", (key,)).fetchone() is not None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
