"""The agent under test: any model on an OpenAI-compatible endpoint.

One turn (:meth:`OpenAIAgent.respond`):

1. the request is the system prompt with the task's knowledge documents
   (:mod:`cirrus.agents.prompts`), the history so far (the task's history and
   the walk's, OpenAI messages), and the customer's query; the task's tools
   are offered as OpenAI function schemas;
2. every tool call the model makes is answered by replaying the task's
   cassette (:class:`~cirrus.replay.ToolReplayer`); a call the cassette does
   not hold gets a "no recorded result" tool error
   (``ToolCallMade.recorded = False``); the results go back to the model;
3. this loops until the model answers in text, or ``max_model_calls`` model
   calls were made (default 8).  The last allowed call is sent with
   ``tool_choice="none"`` so the model answers in text; should it call tools
   anyway, the calls are replayed and recorded and the turn ends with
   whatever text came with them.

STL (``AgentTurn.output_tokens``) is the sum over the turn's model calls of
``usage.completion_tokens``, which includes reasoning tokens in OpenAI's
API; a call whose answer carries no usage is counted with the offline
tiktoken encoding (text, reasoning text, tool calls).  ``input_tokens`` sums
``usage.prompt_tokens`` the same way (tiktoken over the request's messages
where missing).  ``wall_s`` is the turn's wall-clock time, replay included.

What the model answers besides a clean reply is handled and recorded as an
agent note on the turn (:mod:`cirrus.agents.replies`): ``<think>`` blocks
are removed from the reply (kept in the note); an empty reply, arguments
that are not JSON, a call to a tool the task did not offer and an answer cut
at the output limit are noted.  Tool calls the model wrote as text in its
message (:mod:`cirrus.agents.text_tool_calls`) are read as tool calls only
with ``text_tool_calls=True`` (the call's ``read_from_text`` names the form);
by default the reply is judged as the text it is and the turn notes that it
looked like a tool call.  A request longer than the model's context is an
infrastructure error that says so.

Agent calls are never cached: every attempt is an independent sample.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from collections.abc import Callable, Mapping
from typing import Any

from cirrus import strict_json
from cirrus.agents import knowledge_tool, prompts
from cirrus.agents import replies as notes
from cirrus.agents.config import AgentConfig, ToolView, render_template, template_context, uses_variable
from cirrus.agents.text_tool_calls import read_text_tool_calls
from cirrus.evaluate.types import AgentTurn, InfrastructureError, ToolCallMade, TurnRequest
from cirrus.llm.client import ChatClient, ChatResult
from cirrus.llm.client.results import assistant_message
from cirrus.replay import NoRecordedResult, ToolReplayer
from cirrus.tool_matching import without_rules

DEFAULT_MAX_MODEL_CALLS = 8


@dataclass(slots=True)
class _Answer:
    """One model answer as the turn uses it."""

    message: dict[str, Any]  # the assistant message for the history and the transcript
    text: str  # the reply's text (reasoning and calls read from text removed)
    tool_calls: list[dict[str, Any]]
    read_from_text: str | None = None  # the form of tool calls read from the text


class OpenAIAgent:
    offline = False

    def __init__(
        self,
        client: ChatClient,
        *,
        max_model_calls: int = DEFAULT_MAX_MODEL_CALLS,
        system_prompt: str = prompts.SYSTEM_PROMPT,
        text_tool_calls: bool = False,
        text_on_last_call: bool = True,
        config: AgentConfig | None = None,
        tool_view_of: Callable[[Mapping[str, Any]], ToolView] | None = None,
        domain: str = "",
    ) -> None:
        """``text_tool_calls``: read tool calls the model writes as text in
        its message as tool calls (:mod:`cirrus.agents.text_tool_calls`); off,
        such a reply is judged as text and the turn notes it.  ``config``:
        your agent's ``[agent]`` (:mod:`cirrus.agents.config`): its prompt
        template (rendered per task, ``domain`` one of its variables) and
        where the knowledge goes; ``tool_view_of``: the tools a task offers
        under your names, and the way back to the recorded calls (default:
        the task's own tools, as recorded)."""
        if max_model_calls < 1:
            raise ValueError("max_model_calls must be >= 1")
        self.client = client
        self.max_model_calls = max_model_calls
        self.system_prompt = system_prompt
        self.text_tool_calls = text_tool_calls
        self.text_on_last_call = text_on_last_call
        self.config = config
        self.tool_view_of = tool_view_of
        self.domain = domain
        self._template = config.template_text() if config is not None else None
        self._template_places_context = self._template is not None and uses_variable(self._template, "context")
        self.name = client.model

    def fingerprint(self) -> dict[str, Any]:
        """What a resumed run must keep the same: model, parameters, prompt, limits."""
        prompt_hash = hashlib.sha256(
            "\0".join((self.system_prompt, prompts.KNOWLEDGE_HEADER, prompts.NO_RECORDED_RESULT)).encode("utf-8")
        ).hexdigest()
        return {
            **self.client.role.fingerprint(),
            "prompt_sha256": prompt_hash,
            "max_model_calls": self.max_model_calls,
            "text_on_last_call": self.text_on_last_call,
            # only when on: runs made before the option existed resume as they were
            **({"text_tool_calls": True} if self.text_tool_calls else {}),
        }

    async def respond(self, request: TurnRequest, replayer: ToolReplayer) -> AgentTurn:
        started = time.perf_counter()
        task = request.task
        view = self.tool_view_of(task) if self.tool_view_of is not None else None
        tools = self._offered(task, view) or None
        search_name = self._knowledge_tool()
        offered = _tool_names(tools)
        to_recorded = view.recorded_call if view is not None else None
        messages: list[dict[str, Any]] = [
            *self._opening(task, tools or []),
            *request.history,
            {"role": "user", "content": request.query},
        ]
        turn = AgentTurn(text="")
        answer: _Answer | None = None
        for call in range(self.max_model_calls):
            last_call = call == self.max_model_calls - 1
            tool_choice = "none" if (last_call and tools and self.text_on_last_call) else None
            result = await self._complete(messages, tools, tool_choice)
            turn.model_calls += 1
            turn.output_tokens += result.output_tokens()
            turn.input_tokens += result.prompt_tokens if result.prompt_tokens is not None else _count_input(messages)
            answer = self._read(result, offered, turn)
            messages.append(answer.message)
            turn.messages.append(answer.message)
            if not answer.tool_calls:
                break
            for tool_call in answer.tool_calls:
                if search_name is not None and (tool_call.get("function") or {}).get("name") == search_name:
                    tool_message = self._search(tool_call, task, turn)
                    messages.append(tool_message)
                    turn.messages.append(tool_message)
                    continue
                tool_message = self._run_tool(tool_call, replayer, turn, offered=offered,
                                              read_from_text=answer.read_from_text, to_recorded=to_recorded)
                messages.append(tool_message)
                turn.messages.append(tool_message)
        turn.text = answer.text if answer is not None else ""
        if not turn.text.strip():
            turn.notes.append(notes.note(notes.EMPTY_REPLY, turn.model_calls, tool_calls=len(turn.tool_calls)))
        turn.wall_s = time.perf_counter() - started
        return turn

    def _opening(self, task: Mapping[str, Any], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages before the conversation: the system prompt (Cirrus's,
        or your template rendered for ``task``) with the knowledge where
        ``[agent] knowledge`` puts it, and the task's customer context (in the
        system message, unless your template places it itself)."""
        place = self.config.knowledge if self.config is not None else "system"
        if self._template is None:
            prompt, add_context = self.system_prompt, True
        else:
            prompt = render_template(self._template, template_context(task, tools, self.domain))
            add_context = not self._template_places_context
        system = prompts.system_message(task, prompt, knowledge=place == "system", context=add_context)
        opening = [{"role": "system", "content": system}]
        documents = task.get("knowledge") or []
        if place == "message" and documents:
            opening.append({"role": "system", "content": f"{prompts.KNOWLEDGE_HEADER}\n\n"
                                                         f"{prompts.render_knowledge(documents)}"})
        return opening

    def _offered(self, task: Mapping[str, Any], view: ToolView | None) -> list[dict[str, Any]]:
        """The tool schemas the model is sent for ``task``: your view of the
        tools (or the task's own), and the knowledge search when it is one."""
        tools = list(view.schemas) if view is not None else without_rules(task.get("tools") or [])
        search_name = self._knowledge_tool()
        if search_name is not None:
            tools.append(knowledge_tool.tool_schema(search_name))
        return tools

    def offered_tools(self, task: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The tool schemas a turn of ``task`` sends (for the estimate)."""
        return self._offered(task, self.tool_view_of(task) if self.tool_view_of is not None else None)

    def system_text(self, task: Mapping[str, Any]) -> str:
        """The messages a turn of ``task`` sends before the conversation, as
        one text (for the estimate)."""
        opening = self._opening(task, self.offered_tools(task))
        return "\n\n".join(str(message["content"]) for message in opening)

    def _knowledge_tool(self) -> str | None:
        """The knowledge search's name when ``[agent] knowledge = "tool"``."""
        if self.config is None or self.config.knowledge != "tool":
            return None
        return self.config.knowledge_tool

    def _search(self, tool_call: dict[str, Any], task: Mapping[str, Any], turn: AgentTurn) -> dict[str, Any]:
        """Answer a knowledge search from the task's documents (not the
        cassette: not one of the turn's scored tool calls)."""
        raw = (tool_call.get("function") or {}).get("arguments")
        try:
            arguments = strict_json.loads(raw) if isinstance(raw, str) and raw.strip() else raw
        except ValueError:
            arguments = raw
        query = knowledge_tool.query_of(arguments)
        assert self.config is not None
        found = knowledge_tool.search(task.get("knowledge") or [], query, self.config.knowledge_top_k)
        turn.notes.append(notes.note(notes.KNOWLEDGE_SEARCHED, turn.model_calls, query=query,
                                     documents=[p["doc_id"] for p in found]))
        return {"role": "tool", "tool_call_id": tool_call.get("id") or "",
                "content": json.dumps({"results": found}, ensure_ascii=False)}

    async def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                        tool_choice: str | None) -> ChatResult:
        """One model call (a request longer than the model's context is an
        error that says so: :func:`cirrus.llm.client.errors.context_overflow`)."""
        return await self.client.complete(messages, tools=tools, tool_choice=tool_choice)

    def _read(self, result: ChatResult, offered: frozenset[str], turn: AgentTurn) -> _Answer:
        """The answer of one model call: reasoning blocks removed, tool calls
        written as text read (or noted), each thing done noted on ``turn``."""
        number = turn.model_calls
        text, reasoning = notes.strip_think(result.content or "")
        if reasoning is not None:
            turn.notes.append(notes.note(notes.THINK_REMOVED, number, text=reasoning))
        if result.finish_reason == "length":
            turn.notes.append(notes.note(notes.CUT_AT_MAX_TOKENS, number))
        calls, form = list(result.tool_calls), None
        written = read_text_tool_calls(text, offered) if not calls else None
        if written is not None and written.unreadable:
            turn.notes.append(notes.note(notes.TOOL_CALL_TEXT_UNREADABLE, number, text=written.unreadable))
        if written is not None and written.calls:
            details = {"form": written.form, "tools": written.names}
            if self.text_tool_calls:
                turn.notes.append(notes.note(notes.TOOL_CALL_READ_FROM_TEXT, number, **details))
                calls, form, text = written.openai_calls(f"text-{number}"), written.form, written.rest
            else:
                turn.notes.append(notes.note(notes.TOOL_CALL_AS_TEXT, number, **details))
        return _Answer(assistant_message(text, calls), text, calls, form)

    @staticmethod
    def _run_tool(tool_call: dict[str, Any], replayer: ToolReplayer, turn: AgentTurn, *,
                  offered: frozenset[str] | None = None, read_from_text: str | None = None,
                  to_recorded: Callable[[str, Any], tuple[str, Any]] | None = None) -> dict[str, Any]:
        """Replay one tool call; under your own tool names (``to_recorded``)
        it is replayed, and recorded for TIA/TSA/TEV, as the recorded call
        it maps to."""
        function = tool_call.get("function") or {}
        name = str(function.get("name") or "")
        raw_arguments = function.get("arguments")
        if offered is not None and name not in offered:  # checked under the name the agent used
            turn.notes.append(notes.note(notes.UNKNOWN_TOOL, turn.model_calls, tool=name))
        if to_recorded is not None:
            name, raw_arguments = to_recorded(name, raw_arguments)
            if not isinstance(raw_arguments, (str, type(None))):
                raw_arguments = json.dumps(raw_arguments, ensure_ascii=False)
        arguments: Any = raw_arguments
        if isinstance(raw_arguments, str):
            try:
                # strict: 1e999 or NaN stay the model's raw text, never a float
                # that would be written as a bare Infinity (not JSON)
                arguments = strict_json.loads(raw_arguments) if raw_arguments.strip() else {}
            except ValueError:
                arguments = raw_arguments
                turn.notes.append(notes.note(notes.ARGUMENTS_NOT_JSON, turn.model_calls, tool=name))
        try:
            result = replayer.call(name, raw_arguments)
        except NoRecordedResult as exc:
            turn.tool_calls.append(ToolCallMade(name, arguments, None, recorded=False, error=str(exc),
                                                read_from_text=read_from_text))
            content = prompts.no_recorded_result_content()
        except Exception as exc:  # a broken cassette is not the model's fault
            raise InfrastructureError(f"replaying tool call {name} failed: {type(exc).__name__}: {exc}") from exc
        else:
            turn.tool_calls.append(ToolCallMade(name, arguments, result, recorded=True, read_from_text=read_from_text))
            content = prompts.tool_result_content(result)
        return {"role": "tool", "tool_call_id": tool_call.get("id") or "", "content": content}


def _tool_names(tools: list[dict[str, Any]] | None) -> frozenset[str]:
    return frozenset(str((tool.get("function") or {}).get("name") or "") for tool in tools or ()) - {""}


def _count_input(messages: list[dict[str, Any]]) -> int:
    """Tokens of a request's messages (or tools), for an answer that reported
    no usage."""
    from cirrus.offline import count_tokens

    return count_tokens(json.dumps(messages, ensure_ascii=False))
