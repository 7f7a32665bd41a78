"""How a value reads in a cell: on the page (:func:`page_value`, an en dash
for no value) and in the terminal (:func:`fmt_value`, a hyphen)."""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["as_float", "fmt_value", "interval_text", "json_view", "money", "page_interval", "page_value",
           "plain_number", "pretty_json", "share_text"]

PAGE_DASH = "–"


def as_float(value: Any) -> float:
    """A float for plotting and comparing: ``nan`` for null / non-finite."""
    if value is None:
        return math.nan
    try:
        value = float(value)
    except (TypeError, ValueError):
        return math.nan
    return value if math.isfinite(value) else math.nan


def page_value(value: Any, digits: int = 3) -> str:
    """A cell of the page: ``–`` for no (or a non-finite) value, a float to ``digits``."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return PAGE_DASH
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def page_interval(value: Any, low: Any, high: Any) -> str:
    """``0.812 [0.70, 0.90]`` on the page; ``–`` for no value."""
    if value is None:
        return PAGE_DASH
    return page_value(value) + (f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else "")


def fmt_value(value: Any, digits: int = 3) -> str:
    """A table cell of the terminal: ``-`` for no value, a float to ``digits``."""
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def interval_text(value: Any, low: Any, high: Any, digits: int = 3) -> str:
    """``0.812 [0.70, 0.90]``; ``-`` for no value; the value alone without an interval."""
    if value is None:
        return "-"
    if low is None or high is None:
        return fmt_value(value, digits)
    if digits == 3:
        return f"{value:.3f} [{low:.2f}, {high:.2f}]"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def money(value: Any) -> str:
    """A cost on the page: four decimals, ``–`` for none."""
    return PAGE_DASH if value is None else f"{value:.4f}"


def share_text(part: int, whole: int) -> str:
    """``12.5%`` of ``whole``; ``–`` when ``whole`` is 0."""
    return f"{part / whole:.1%}" if whole else PAGE_DASH


def plain_number(value: float | int | None) -> str:
    """Integers as integers, other numbers with two decimals (as ``cirrus stats``)."""
    if value is None:
        return PAGE_DASH
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{value:.2f}"


def pretty_json(value: Any) -> str:
    """JSON (indented) for tool arguments and results; strings that are no JSON as they are."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, ValueError):
            return value
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def json_view(text: str | None) -> str | None:
    """:func:`pretty_json` of a JSON text; ``None`` stays ``None``."""
    return None if text is None else pretty_json(text)
