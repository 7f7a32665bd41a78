#!/usr/bin/env python
"""Reading a .json ticket list whose messages hold one very long string.

Times cirrus's .json reader (ijson's yajl2_c backend, streamed) on a list of
one ticket whose customer message is N characters of ASCII or of non-ASCII
text (``é漢``), and the parser alone at several read sizes.  Prints a
Markdown table; no files are written outside a temporary folder.

    .venv/bin/python benchmarks/long_strings.py
"""

from __future__ import annotations

import io
import json
import tempfile
import time
from pathlib import Path

from cirrus.ingest.readers.files import READ_SIZE, _ijson, read_file_records

SIZES = (100_000, 1_000_000, 3_000_000, 10_000_000)
READ_SIZES = (64 << 10, 1 << 20, READ_SIZE)


def _document(chars: int, alphabet: str) -> bytes:
    text = (alphabet * (chars // len(alphabet) + 1))[:chars]
    ticket = {"ticket_id": "long-1", "events": [{"role": "customer", "text": text}]}
    return json.dumps([ticket], ensure_ascii=False).encode()


def _seconds(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    print("| characters | text | parser @ 64 KiB (s) | parser @ 1 MiB (s) | parser @ 4 MiB (s) | cirrus reader (s) |")
    print("|---:|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for chars in SIZES:
            for label, alphabet in (("ASCII", "ab"), ("non-ASCII", "é漢")):
                data = _document(chars, alphabet)
                parser = [_seconds(lambda: list(_ijson.items(io.BytesIO(data), "item", buf_size=size)))
                          for size in READ_SIZES]
                path = Path(folder) / "long.json"
                path.write_bytes(data)
                reader = _seconds(lambda: list(read_file_records(path, "long.json")))
                print(f"| {chars:,} | {label} | " + " | ".join(f"{s:.3f}" for s in parser) + f" | {reader:.3f} |")


if __name__ == "__main__":
    main()
