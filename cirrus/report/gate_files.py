"""Where ``cirrus gate`` writes its result on request: the Markdown of a
CI step summary and JUnit XML (rendered by :mod:`cirrus.report.views.gate`),
each written atomically."""

from __future__ import annotations

from pathlib import Path

from cirrus.report.gate import GateResult

__all__ = ["write_gate_files"]


def write_gate_files(result: GateResult, *, markdown: Path | None = None, junit: Path | None = None) -> list[Path]:
    """Write the gate's Markdown summary and JUnit XML where asked, each
    replacing the file (never a cut one: written beside it and renamed);
    the paths written."""
    from cirrus.files import atomic_writer
    from cirrus.report.views.gate import gate_junit, gate_markdown

    written = []
    for path, render in ((markdown, gate_markdown), (junit, gate_junit)):
        if path is None:
            continue
        with atomic_writer(path, advice="free space and run cirrus gate again") as handle:
            handle.write(render(result))
        written.append(path)
    return written
