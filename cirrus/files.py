"""Writing files so that a crash never leaves a half-written one."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_writer(path: Path) -> Iterator[IO[str]]:
    """Write to a temporary file beside ``path`` and rename it into place on
    success; on failure the old file (if any) is untouched."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
