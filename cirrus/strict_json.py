"""JSON as it can be written back: ``json.loads`` without what Python reads
beyond the standard (NaN, Infinity, numbers that overflow to infinity, lone
surrogates).  Readers of raw tickets and of model output use it, so nothing
Cirrus writes (workspaces, transcripts, reports) ever holds a bare
``Infinity`` that other JSON parsers refuse."""

from __future__ import annotations

import json
import math
import re
from typing import Any

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class NotJSON(ValueError):
    """Text that ``json.loads`` reads but that is no JSON value we can write
    back (as JSON, in UTF-8); the message is a short fixed reason."""


def _reject_constant(name: str) -> Any:
    raise NotJSON("NaN or Infinity")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 reads as inf, which JSON cannot hold
        raise NotJSON("number out of range")
    return value


def loads(text: str) -> Any:
    """``json.loads`` without what it accepts beyond JSON: NaN/Infinity,
    numbers that overflow to infinity, and ``\\ud800``-style escapes of a
    lone surrogate (a str that no UTF-8 file can hold)."""
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except (json.JSONDecodeError, NotJSON):
        raise
    except ValueError:  # int() refuses more than sys.get_int_max_str_digits() digits
        raise NotJSON("integer too long") from None
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(value):
        raise NotJSON("lone surrogate in a \\u escape")
    return value


def _has_lone_surrogate(value: Any) -> bool:
    """Any lone surrogate in the strings (keys too) of ``value``; iterative,
    because ``value`` may be nested as deep as the parser allowed."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
