"""The ``tools`` an agent of your own is given (:class:`RecordingTools`): the
attempt's :class:`~cirrus.replay.ToolReplayer`, seen through a recorder.

Every call is answered from the task's cassette exactly as the built-in
agents' calls are, and recorded as a :class:`ToolCallMade` (what the walk
scores as TIA, TSA and TEV), whether the cassette held an answer or not.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from cirrus import strict_json
from cirrus.agents import prompts
from cirrus.agents.api import public_task
from cirrus.evaluate.types import InfrastructureError, ToolCallMade
from cirrus.replay import NoRecordedResult, ToolReplayer
from cirrus.tool_matching import without_rules


def parse_arguments(arguments: Any) -> Any:
    """Tool arguments as transcripts keep them: a JSON string read as its
    value (strictly: ``1e999`` or ``NaN`` stay text), an empty string as
    ``{}``, anything else (a dict, text that is not JSON) as it is."""
    if not isinstance(arguments, str):
        return arguments
    if not arguments.strip():
        return {}
    try:
        return strict_json.loads(arguments)
    except ValueError:
        return arguments


class AgentToolView(Protocol):
    """The tools as an agent knows them (its own names; an
    ``[agent.tools]`` configuration, :class:`cirrus.agents.config.ToolView`):
    the schemas it is offered, and the way back to the recorded calls."""

    schemas: Sequence[Mapping[str, Any]]

    def recorded_call(self, name: str, arguments: Any) -> tuple[str, Any]: ...


# a task -> the tools its agent is offered (None: the task's own ``tools``, under the recorded names)
ToolViewOf = Callable[[Mapping[str, Any]], AgentToolView]


def agent_view(task: Mapping[str, Any], tool_view: ToolViewOf | None = None
               ) -> tuple[dict[str, Any], Callable[[str, Any], tuple[str, Any]] | None]:
    """The task as its agent sees it (:func:`cirrus.agents.api.public_task`,
    its ``tools`` the view's schemas when there is a ``tool_view``) and the
    way back from the agent's tool calls to the recorded ones (``None``:
    the names are the recorded ones)."""
    seen = public_task(task)
    if tool_view is None:
        return seen, None
    view = tool_view(task)
    seen["tools"] = without_rules(copy.deepcopy([dict(schema) for schema in view.schemas]))
    return seen, view.recorded_call


class RecordingTools:
    """Answers tool calls from the attempt's cassette and records each one.

    :meth:`call` is :meth:`ToolReplayer.call`: the recorded result of tool
    ``name`` with ``arguments`` (a JSON value, or a JSON string as models send
    them), or :class:`~cirrus.replay.NoRecordedResult` when the cassette holds
    none.  ``calls`` lists every call made, in order.  With ``to_recorded``
    (an :class:`AgentToolView`'s ``recorded_call``), a call made under the
    agent's own tool and argument names is replayed, and recorded, as the
    recorded call it maps to (what TIA/TSA/TEV compare with the reference)."""

    def __init__(self, replayer: ToolReplayer,
                 to_recorded: Callable[[str, Any], tuple[str, Any]] | None = None) -> None:
        self._replayer = replayer
        self._to_recorded = to_recorded
        self.calls: list[ToolCallMade] = []

    def call(self, name: str, arguments: Any) -> Any:
        if self._to_recorded is not None:
            name, arguments = self._to_recorded(name, arguments)
        parsed = parse_arguments(arguments)
        try:
            result = self._replayer.call(name, arguments)
        except NoRecordedResult as exc:
            self.calls.append(ToolCallMade(name, parsed, None, recorded=False, error=str(exc)))
            raise
        except Exception as exc:  # a broken cassette is not the agent's fault
            raise InfrastructureError(f"replaying tool call {name} failed: {type(exc).__name__}: {exc}") from exc
        self.calls.append(ToolCallMade(name, parsed, result, recorded=True))
        return result

    def answer(self, name: str, arguments: Any) -> str:
        """The content of the tool message that answers a call: the recorded
        result as text, or the documented "no recorded result" error
        (:data:`cirrus.agents.prompts.NO_RECORDED_RESULT`), as built-in
        model agents get it."""
        try:
            return prompts.tool_result_content(self.call(name, arguments))
        except NoRecordedResult:
            return prompts.no_recorded_result_content()
