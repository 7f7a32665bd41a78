"""``cirrus pii-eval LABELS``: de-identification measured against a labelled
PII set by :func:`cirrus.pii_eval.evaluate` (recall, masked recall and
precision per entity type), printed as a table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from cirrus.commands._common import console, fail, out

__all__ = ["pii_eval"]


def pii_eval(
    labels: Annotated[Path, typer.Argument(help="Labelled PII set (presidio-research JSON format).")],
    pipeline: Annotated[str, typer.Option(help="Pipeline config whose de-identification is measured.")] = "default",
    limit: Annotated[Optional[int], typer.Option(help="Only the first N examples.")] = None,
    language: Annotated[Optional[str], typer.Option(
        help="Language of the set (en, zh): its de-identifier is measured. Default: detected from the texts.")] = None,
) -> None:
    """Measure de-identification recall and precision per entity type."""
    from cirrus.config import ConfigError, load_pipeline
    from cirrus.ingest.deid.deidentify import Deidentifiers
    from cirrus.ingest.language import detect_language, normalize_language
    from cirrus.pii_eval import evaluate, load_examples

    try:
        examples = load_examples(labels)[:limit]
        config = load_pipeline(pipeline)
    except (ValueError, ConfigError, FileNotFoundError) as exc:
        fail(str(exc))
    lang = normalize_language(language) if language else detect_language(e["full_text"] for e in examples)
    with console.status(f"analysing {len(examples)} examples ({lang})"):
        scores = evaluate(Deidentifiers(config).for_language(lang), examples)
    table = Table(title=f"de-identification on {labels.name} ({len(examples)} texts, {lang}, pipeline {config.name})")
    for column in ("entity", "gold", "recall", "masked recall", "detected", "precision"):
        table.add_column(column, justify="left" if column == "entity" else "right")
    for s in scores:
        fmt = lambda v: "-" if v != v else f"{v:.3f}"  # noqa: E731  (nan -> '-')
        table.add_row(s.entity, str(s.gold), fmt(s.recall), fmt(s.masked_recall), str(s.predicted), fmt(s.precision))
    out.print(table)
