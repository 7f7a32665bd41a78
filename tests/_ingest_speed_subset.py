"""Part of the sample input, for the tests that run ``cirrus ingest`` in a
child process more than once per test (killed or interrupted, then run
again) and compare the result with what an uninterrupted ingest writes.

Those tests check how the command behaves when it is stopped -- never a
temporary file under a real name, exit codes, a re-run that completes the
workspace byte for byte -- not what it makes of each ticket (test_ingest_e2e
and the committed sample workspace do that).  Every child process pays for
its imports, the model load, the knowledge documents and each ticket it
settles: a few files of tickets/raw (tickets with tool calls, so cassettes,
and quarantined lines) against three of its knowledge documents cost each
child process well under what the whole sample costs.

What an uninterrupted ingest of such a part writes is computed once per
test process (pytest-xdist: once per worker) and part, in-process, with the
options the ``cirrus ingest`` commands of those tests give (the ``--jobs``
count does not change what is written: test_ingest_e2e shows it).  Read only.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from tests.conftest import SAMPLE_KB, SAMPLE_RAW, workspace_snapshot

# Files of tickets/raw, in the order ingest reads them (sorted by path; ingest
# settles them in chunks of 8 tickets).  TINY: 3 tickets (gzipped JSONL in a
# sub-folder), each with a tool call.  SMALL: 8 tickets (gzipped JSONL in a
# sub-folder, a JSON list), 7 with tool calls: one chunk.  MEDIUM: 14 tickets
# (SMALL, then JSONL with a quarantined line), 12 with tool calls: two chunks,
# 7 cassettes in the first.  LARGE: 22 tickets (all formats: an OpenAI chat
# export too), 18 with tool calls: three chunks.
TINY = ("archive/older.jsonl.gz",)
SMALL = (*TINY, "billing.json")
MEDIUM = (*SMALL, "sms.jsonl")
LARGE = (*SMALL, "chat_export.json", "domain.jsonl", "sms.jsonl")
KB_FILES = ("kb-billing-refund-policy.md", "kb-domain-icp-filing.md", "kb-sms-delivery-status-codes.md")


@dataclass(frozen=True)
class SampleSubset:
    raw: Path  # a folder holding the files of tickets/raw chosen
    kb: Path  # a folder holding KB_FILES
    uninterrupted: Mapping[str, bytes]  # workspace_snapshot of an uninterrupted ingest of raw with --kb kb
    tasks: int
    cassettes: int  # written by that ingest


_BUILT: dict[tuple[str, ...], SampleSubset] = {}


def sample_subset(tmp_path_factory, pipeline_config, files: tuple[str, ...]) -> SampleSubset:
    """``files`` of tickets/raw and what an uninterrupted ingest of them
    writes (built on first use in this process, in the session's temporary
    folder)."""
    if files not in _BUILT:
        _BUILT[files] = _build(tmp_path_factory.mktemp("sample-subset"), pipeline_config, files)
    return _BUILT[files]


def _build(root: Path, pipeline_config, files: tuple[str, ...]) -> SampleSubset:
    from cirrus.ingest.run import IngestOptions, run_ingest

    raw, kb = root / "raw", root / "kb"
    for name in files:
        (raw / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(SAMPLE_RAW / name, raw / name)
    kb.mkdir()
    for name in KB_FILES:
        shutil.copy2(SAMPLE_KB / name, kb / name)
    workspace = root / "uninterrupted"
    manifest = run_ingest(IngestOptions(raw_path=raw, workspace=workspace, pipeline=pipeline_config, kb_dir=kb,
                                        jobs=1, progress=False)).manifest
    cassettes = len(list((workspace / "tool_mocks").glob("*.yaml")))
    tasks = (workspace / "tickets" / "tasks.jsonl").read_text(encoding="utf-8")
    # what the tests rely on: tasks with cassettes, their knowledge from the --kb documents
    assert manifest["counts"]["tasks"] >= cassettes >= 3, manifest  # (a test that counts on more checks its own)
    assert '"doc_id":"kb-' in tasks, "no task holds a --kb document"
    return SampleSubset(raw, kb, MappingProxyType(workspace_snapshot(workspace)), manifest["counts"]["tasks"],
                        cassettes)
