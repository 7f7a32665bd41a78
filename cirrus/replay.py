"""Answer an agent's tool calls from a task's vcrpy cassette (contract 2 and 4).

A :class:`ToolReplayer` loads one cassette once (vcrpy's ``Cassette.load``,
``record_mode="none"``, matching on method, URI and the canonical JSON of the
body) and answers each call by POSTing it with httpx to the tool's URL
(:func:`cirrus.ingest.cassettes.tool_url`).  The httpx transport is vcrpy's
own httpx stub bound to that cassette, not vcrpy's process-wide monkeypatch:
``use_cassette`` patches every httpx transport class while it is open, which
would also catch the evaluator's concurrent LLM requests.  Below the stub
sits a transport that refuses to send anything, so a request vcrpy does not
answer can never reach the network (and with ``record_mode="none"`` vcrpy
raises before it would try).

Order: vcrpy plays the interactions that match a call in file order, each
once.  Once all of them have been played, the replayer marks the last one
unplayed again, so a repeated call gets every recorded answer in order and
then the last one forever.  One replayer is one evaluation attempt's state;
:meth:`ToolReplayer.rewind` starts over, :meth:`ToolReplayer.position` and
:meth:`ToolReplayer.seek` save and restore it.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote

import types
from typing import TYPE_CHECKING

# imported now, not with vcrpy: the OpenAI SDK looks up ``sys.modules["httpx"]`` on every request, and
# an import of httpx on another thread (the run's estimate reading cassettes) while requests are in
# flight would show it a half-initialised module
import httpx
import yaml

if TYPE_CHECKING:
    from vcr.cassette import Cassette
    from vcr.request import Request

from cirrus.ingest.cassettes import canonical_arguments, canonical_json, dump_cassette, tool_url
from cirrus.schema import Task
from cirrus.tool_matching import ToolMatching, match_key, matching_from_schemas
from cirrus.workspace import MOCKS_DIR

_MAX_SHOWN_ARGUMENTS = 500


class NoRecordedResult(LookupError):
    """The cassette holds no answer for this tool call."""

    def __init__(self, tool: str, arguments: str, cassette: str | None) -> None:
        self.tool = tool
        self.arguments = arguments
        self.cassette = cassette
        shown = arguments if len(arguments) <= _MAX_SHOWN_ARGUMENTS else arguments[:_MAX_SHOWN_ARGUMENTS] + "..."
        where = f"in cassette {cassette}" if cassette else "(the task has no cassette)"
        super().__init__(f"no recorded result for tool {tool} with arguments {shown} {where}")


@functools.lru_cache(maxsize=8192)
def _canonical_body(body: bytes | None) -> str | bytes | None:
    """The canonical JSON of a request body; the raw bytes if it is not JSON."""
    if body is None:
        return None
    try:
        return canonical_json(json.loads(body))
    except ValueError:
        return body


def canonical_body(r1: Request, r2: Request) -> None:
    """vcrpy matcher: bodies are equal as JSON (key order, whitespace ignored)."""
    if _canonical_body(_as_bytes(r1.body)) != _canonical_body(_as_bytes(r2.body)):
        raise AssertionError("the bodies differ as canonical JSON")


def _as_bytes(body: Any) -> bytes | None:
    return body.encode("utf-8") if isinstance(body, str) else body


class CassetteError(ValueError):
    """A cassette file that cannot be read (not YAML, an unsafe tag, not vcrpy's layout)."""


class _SafeYamlSerializer:
    """vcrpy serializer that reads with PyYAML's safe loader only.

    Cirrus writes cassettes with the safe dumper, so no ``!!python/...`` tag
    is ever needed; reading them safely here does not depend on which YAML
    loader the installed vcrpy uses (its own adds constructors for a few
    Python tags)."""

    @staticmethod
    def deserialize(text: str) -> Any:
        if yaml.__with_libyaml__:
            return yaml.load(text, Loader=yaml.CSafeLoader)
        return yaml.safe_load(text)

    @staticmethod
    def serialize(data: Any) -> str:
        return dump_cassette(data)


_VCR_LOCK = threading.Lock()


def _vcr() -> types.SimpleNamespace:
    """:func:`_load_vcr`, once, whichever thread asks first (the run's
    estimate reads cassettes on a thread while the walks start)."""
    with _VCR_LOCK:
        return _load_vcr()


@functools.cache
def _load_vcr() -> types.SimpleNamespace:
    """vcrpy and httpx, imported on the first cassette loaded: ``import vcr``
    imports ``requests`` and more for its patches (~0.1 s), which a run need
    not wait for before its first model request."""
    from vcr.cassette import Cassette
    from vcr.errors import CannotOverwriteExistingCassetteException
    from vcr.matchers import method, uri
    from vcr.persisters.filesystem import FilesystemPersister
    from vcr.record_mode import RecordMode
    from vcr.serialize import deserialize
    from vcr.stubs.httpx_stubs import vcr_handle_request

    class Utf8Persister(FilesystemPersister):
        """vcrpy's filesystem persister, reading UTF-8 whatever the locale."""

        @classmethod
        def load_cassette(cls, cassette_path, serializer):  # type: ignore[no-untyped-def]
            return deserialize(Path(cassette_path).read_text(encoding="utf-8"), serializer)

    def refuse_network(transport: httpx.BaseTransport, request: httpx.Request) -> httpx.Response:
        raise RuntimeError(f"tool replay never sends requests; vcrpy let {request.url} through")

    class CassetteTransport(httpx.BaseTransport):
        """An httpx transport answered by vcrpy from one loaded cassette."""

        def __init__(self, cassette: Cassette) -> None:
            self._handle = vcr_handle_request(cassette, refuse_network, httpx)

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            return self._handle(self, request)

    return types.SimpleNamespace(httpx=httpx, Cassette=Cassette, RecordMode=RecordMode, method=method, uri=uri,
                                 Persister=Utf8Persister, Transport=CassetteTransport,
                                 NotRecorded=CannotOverwriteExistingCassetteException)


class ToolReplayer:
    """Replays the tool calls of one task for one evaluation attempt.

    ``cassette`` is the cassette file, or ``None`` for a task without one
    (every call then raises :class:`NoRecordedResult`).  A path that does not
    exist raises :class:`FileNotFoundError` at once.  Thread-safe.
    """

    def __init__(self, cassette: Path | str | None, matching: ToolMatching | None = None) -> None:
        self.path = None if cassette is None else Path(cassette)
        # per tool, how arguments are compared (cirrus.tool_matching); exact where absent
        self.matching: dict[str, dict[str, str]] = {name: dict(rules) for name, rules in (matching or {}).items()}
        self._lock = threading.Lock()
        self._cassette: Cassette | None = None
        self._client: httpx.Client | None = None
        self._matches: dict[tuple[str, str, Any], list[int]] = {}
        if self.path is None:
            return
        if not self.path.is_file():
            raise FileNotFoundError(f"cassette {self.path} does not exist")
        vcr = _vcr()
        try:
            self._cassette = vcr.Cassette.load(
                path=str(self.path),
                serializer=_SafeYamlSerializer,
                persister=vcr.Persister,
                record_mode=vcr.RecordMode.NONE,
                match_on=(vcr.method, vcr.uri, self._same_body),
            )
        except (ValueError, yaml.YAMLError, KeyError, TypeError, AttributeError) as exc:
            raise CassetteError(f"cassette {self.path} cannot be read: {type(exc).__name__}: {exc}") from None
        for index, request in enumerate(self._cassette.requests):
            self._matches.setdefault(self._key(request.method, request.uri, request.body), []).append(index)
        self._client = vcr.httpx.Client(transport=vcr.Transport(self._cassette), trust_env=False)

    @classmethod
    def for_task(cls, workspace: Path, task: Task | Mapping[str, Any],
                 matching: ToolMatching | None = None) -> ToolReplayer:
        """The replayer of ``task``, whose ``cassette`` is relative to
        ``workspace``; its arguments compared by ``matching`` (default: the
        ``x-cirrus-match`` rules of the task's tool schemas,
        :mod:`cirrus.tool_matching`).  A cassette path outside
        ``tool_mocks/`` (an absolute path, ``..``) raises
        :class:`CassetteError`: a task file must not make the replayer read,
        and hand to the model under test, another file of the machine.
        (Links the user put in ``tool_mocks/`` are followed.)"""
        cassette = task.cassette if isinstance(task, Task) else task.get("cassette")
        if matching is None:
            matching = task_matching(task)
        if cassette is None:
            return cls(None, matching)
        parts = PurePosixPath(os.path.normpath(str(cassette).replace("\\", "/"))).parts
        if len(parts) < 2 or parts[0] != MOCKS_DIR.name or ".." in parts or "\0" in str(cassette):
            raise CassetteError(f"cassette {cassette!r} is not inside {Path(workspace) / 'tool_mocks'}")
        return cls(Path(workspace) / cassette, matching)

    def _body_key(self, url: str, body: Any) -> str | bytes | None:
        """What a request body is compared by: its canonical JSON, after the
        tool's matching rules when it has any."""
        raw = _as_bytes(body)
        name = unquote(url.rsplit("/", 1)[-1])
        if raw is None or name not in self.matching:
            return _canonical_body(raw)
        try:
            return match_key(name, json.loads(raw), self.matching)
        except ValueError:
            return raw

    def _same_body(self, r1: Request, r2: Request) -> None:
        """vcrpy matcher: bodies equal as canonical JSON under the tool's rules."""
        if self._body_key(r1.uri, r1.body) != self._body_key(r2.uri, r2.body):
            raise AssertionError("the bodies differ as canonical JSON")

    def _key(self, http_method: str, url: str, body: Any) -> tuple[str, str, Any]:
        return http_method, url, self._body_key(url, body)

    def call(self, name: str, arguments: Any) -> Any:
        """The recorded result of calling tool ``name`` with ``arguments``
        (a JSON value, or a JSON string as models send them)."""
        body = canonical_arguments(arguments)
        if self._cassette is None or self._client is None:
            raise NoRecordedResult(name, body, None)
        url = tool_url(name)
        payload = body.encode("utf-8")
        with self._lock:
            matching = self._matches.get(self._key("POST", url, payload), ())
            if matching and all(self._cassette.play_counts[i] for i in matching):
                self._cassette.play_counts[matching[-1]] = 0  # all played: repeat the last one
            try:
                response = self._client.post(url, content=payload, headers={"content-type": "application/json"})
            except _vcr().NotRecorded:
                raise NoRecordedResult(name, body, str(self.path)) from None
        return response.json()["result"]

    def position(self) -> dict[int, int]:
        """Where the replay stands: how often each recorded answer was played.
        :meth:`seek` returns to it (subtask mode answers checkpoint *k* from
        where the real dialogue stood before it)."""
        if self._cassette is None:
            return {}
        with self._lock:
            return dict(self._cassette.play_counts)

    def seek(self, position: Mapping[int, int]) -> None:
        """Go back (or forward) to a :meth:`position` of this cassette."""
        if self._cassette is not None:
            with self._lock:
                self._cassette.play_counts = collections.Counter(position)

    def rewind(self) -> None:
        """Forget what was played: the next calls start again at the first answers."""
        if self._cassette is not None:
            with self._lock:
                self._cassette.rewind()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def __enter__(self) -> ToolReplayer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def task_matching(task: Task | Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """The argument-matching rules of ``task``'s tool schemas (``x-cirrus-match``)."""
    tools = task.tools if isinstance(task, Task) else task.get("tools")
    return matching_from_schemas(tools if isinstance(tools, list) else None)


def replay_tool_call(workspace: Path, task: Task | Mapping[str, Any], name: str, arguments: Any) -> Any:
    """One tool call of ``task`` answered from its cassette, with fresh state
    (always the first recorded answer); use a :class:`ToolReplayer` for a
    whole attempt."""
    with ToolReplayer.for_task(workspace, task) as replayer:
        return replayer.call(name, arguments)
