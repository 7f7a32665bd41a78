"""Recorded tool calls as vcrpy cassettes (contract section 2, ``tool_mocks/``).

Every tool is modelled as an HTTP endpoint, ``POST {TOOL_BASE_URL}/tools/{name}``:

* the request body is :func:`canonical_arguments` of the call's arguments,
  UTF-8 encoded, so the same arguments always give the same bytes;
* the response is ``200`` with ``content-type: application/json`` and the body
  ``{"result": <recorded value>}``.  The envelope keeps a ``null`` result
  distinct from an empty body and leaves room for later fields.

A call answered several times (the same call repeated, or one call with
several results) is one interaction per answer, in the order recorded; vcrpy
plays matching interactions in file order, which gives the contract's
"answers in order" for free (:mod:`cirrus.replay` adds "then the last one
again").

Arguments are normalized before they become a body (see
:func:`normalize_arguments`): a JSON string holding an object is that object,
``None`` or an empty string is ``{}``, and any other non-object value ``v`` is
``{"input": v}`` -- the same rule :mod:`cirrus.ingest.tool_schemas` uses, so a
model calling the inferred schema with ``{"input": ...}`` hits the recording.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from cirrus.files import create_mode
from cirrus.schema import ToolExchange, openai_function_name

TOOL_BASE_URL = "http://tools.cirrus.invalid"
CASSETTE_VERSION = 1  # vcrpy's on-disk format version


class _Dumper(yaml.SafeDumper):
    """Safe dumper that never writes anchors: a cassette is read by people."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def canonical_json(value: Any) -> str:
    """Key-sorted, whitespace-free JSON with non-ASCII kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def normalize_arguments(arguments: Any) -> dict[str, Any]:
    """The arguments of a call as a JSON object (see the module docstring).

    Models send arguments as a JSON string; recorded calls hold any JSON value.
    Both end up as the same object, so they compare equal once canonical.
    """
    if isinstance(arguments, str):
        text = arguments.strip()
        if not text:
            return {}
        if text.startswith("{"):
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                return parsed
    if arguments is None:
        return {}
    if isinstance(arguments, dict):
        return arguments
    return {"input": arguments}


def canonical_arguments(arguments: Any) -> str:
    """The canonical JSON of :func:`normalize_arguments`: what TEV compares
    and what a cassette request body holds."""
    return canonical_json(normalize_arguments(arguments))


def tool_url(name: str) -> str:
    """The endpoint of tool ``name`` (quoted, so any name makes a valid URL)."""
    return f"{TOOL_BASE_URL}/tools/{quote(name, safe='')}"


def _interaction(name: str, body: str, result: Any) -> dict[str, Any]:
    return {
        "request": {
            "body": body,
            "headers": {"content-type": ["application/json"]},
            "method": "POST",
            "uri": tool_url(name),
        },
        "response": {
            "body": {"string": json.dumps({"result": result}, ensure_ascii=False, separators=(",", ":"))},
            "headers": {"content-type": ["application/json"]},
            "status": {"code": 200, "message": "OK"},
        },
    }


# What a call the log holds no result for answers, in the cassette and in the
# task's history alike: the real system gave the engineer nothing back, and an
# agent that makes the same call gets the same nothing (so the checkpoint that
# made it stays passable, instead of failing every agent on TEV).
NO_RESULT: dict[str, str] = {"error": "no result was recorded"}


def build_cassette(exchanges: Sequence[ToolExchange]) -> dict[str, Any] | None:
    """The cassette of a task's tool calls, as vcrpy's on-disk dict.

    One interaction per recorded result, in the order of ``exchanges`` and
    then of each exchange's results; a call with no recorded result gets one
    interaction answering :data:`NO_RESULT`.  ``None`` when there is no call.
    """
    interactions = [
        _interaction(openai_function_name(exchange.name), canonical_arguments(exchange.arguments), result)
        for exchange in exchanges
        for result in (exchange.results or [NO_RESULT])
    ]
    if not interactions:
        return None
    return {"interactions": interactions, "version": CASSETTE_VERSION}


def dump_cassette(cassette: dict[str, Any]) -> str:
    """The YAML text of a cassette: safe, key-sorted, unicode kept readable.

    The pure-Python safe dumper is used on purpose so the bytes do not depend
    on whether libyaml is installed.
    """
    return yaml.dump(
        cassette,
        Dumper=_Dumper,
        allow_unicode=True,
        sort_keys=True,
        default_flow_style=False,
        width=120,
    )


def write_cassette(path: Path, cassette: dict[str, Any]) -> None:
    """Write ``cassette`` to ``path`` atomically (temp file + ``os.replace``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = dump_cassette(cassette).encode("utf-8")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            os.fchmod(handle.fileno(), create_mode())  # mkstemp makes it 0600; open() would not
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
