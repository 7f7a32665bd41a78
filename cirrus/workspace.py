"""Where things live in a workspace (contract section 2), in one place."""

from __future__ import annotations

from pathlib import Path

TASKS_FILE = Path("tickets/tasks.jsonl")
MANIFEST_FILE = Path("tickets/manifest.json")
MOCKS_DIR = Path("tool_mocks")
REPORTS_DIR = Path("reports")
# present while an ingest writes the workspace: tasks.jsonl and the cassettes
# it names are only consistent once it is gone (eval refuses to start before)
IN_PROGRESS_FILE = Path("tickets/.ingest-in-progress")
