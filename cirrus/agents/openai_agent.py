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

Agent calls are never cached: every attempt is an independent sample.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from cirrus import strict_json
from cirrus.agents import prompts
from cirrus.evaluate.types import AgentTurn, InfrastructureError, ToolCallMade, TurnRequest
from cirrus.llm.client import ChatClient, ChatResult
from cirrus.replay import NoRecordedResult, ToolReplayer

DEFAULT_MAX_MODEL_CALLS = 8


class OpenAIAgent:
    offline = False

    def __init__(
        self,
        client: ChatClient,
        *,
        max_model_calls: int = DEFAULT_MAX_MODEL_CALLS,
        system_prompt: str = prompts.SYSTEM_PROMPT,
        text_on_last_call: bool = True,
    ) -> None:
        if max_model_calls < 1:
            raise ValueError("max_model_calls must be >= 1")
        self.client = client
        self.max_model_calls = max_model_calls
        self.system_prompt = system_prompt
        self.text_on_last_call = text_on_last_call
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
        }

    async def respond(self, request: TurnRequest, replayer: ToolReplayer) -> AgentTurn:
        started = time.perf_counter()
        task = request.task
        tools = task.get("tools") or None
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": prompts.system_message(task, self.system_prompt)},
            *request.history,
            {"role": "user", "content": request.query},
        ]
        turn = AgentTurn(text="")
        result: ChatResult | None = None
        for call in range(self.max_model_calls):
            last_call = call == self.max_model_calls - 1
            tool_choice = "none" if (last_call and tools and self.text_on_last_call) else None
            result = await self.client.complete(messages, tools=tools, tool_choice=tool_choice)
            turn.model_calls += 1
            turn.output_tokens += result.output_tokens()
            turn.input_tokens += result.prompt_tokens if result.prompt_tokens is not None else _count_input(messages)
            assistant = result.assistant_message()
            messages.append(assistant)
            turn.messages.append(assistant)
            if not result.tool_calls:
                break
            for tool_call in result.tool_calls:
                tool_message = self._run_tool(tool_call, replayer, turn)
                messages.append(tool_message)
                turn.messages.append(tool_message)
        turn.text = result.content if result is not None else ""
        turn.wall_s = time.perf_counter() - started
        return turn

    @staticmethod
    def _run_tool(tool_call: dict[str, Any], replayer: ToolReplayer, turn: AgentTurn) -> dict[str, Any]:
        function = tool_call.get("function") or {}
        name = str(function.get("name") or "")
        raw_arguments = function.get("arguments")
        arguments: Any = raw_arguments
        if isinstance(raw_arguments, str):
            try:
                # strict: 1e999 or NaN stay the model's raw text, never a float
                # that would be written as a bare Infinity (not JSON)
                arguments = strict_json.loads(raw_arguments) if raw_arguments.strip() else {}
            except ValueError:
                arguments = raw_arguments
        try:
            result = replayer.call(name, raw_arguments)
        except NoRecordedResult as exc:
            turn.tool_calls.append(ToolCallMade(name, arguments, None, recorded=False, error=str(exc)))
            content = prompts.no_recorded_result_content()
        except Exception as exc:  # a broken cassette is not the model's fault
            raise InfrastructureError(f"replaying tool call {name} failed: {type(exc).__name__}: {exc}") from exc
        else:
            turn.tool_calls.append(ToolCallMade(name, arguments, result, recorded=True))
            content = prompts.tool_result_content(result)
        return {"role": "tool", "tool_call_id": tool_call.get("id") or "", "content": content}


def _count_input(messages: list[dict[str, Any]]) -> int:
    """Tokens of a request's messages, for an answer that reported no usage."""
    from cirrus.offline import count_tokens

    return count_tokens(json.dumps(messages, ensure_ascii=False))
