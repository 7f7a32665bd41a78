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
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

CACHE_VERSION = "cirrus-llm-cache-1"


class ResponseCache:
    FILENAME = "llm-cache.sqlite3"

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / self.FILENAME
        # sqlite would create the file 0644 whatever the umask (its -wal and
        # -shm files copy the database's mode): create it as open() does
        self.path.touch(exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"
        )

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
