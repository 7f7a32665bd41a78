"""What a real model answers besides a clean reply, reproduced by a local
double (tests/chat_server.py), and what OpenAIAgent does with each: tool calls
written as text (read only when asked, noted always), <think> blocks, empty
replies, arguments that are not JSON, unknown tools, answers cut at the
output limit, a request longer than the model's context, a slow first token.
The answers are the shapes Qwen2.5-Coder-0.5B gave through llama.cpp's server
(benchmarks/real_model.py)."""

from __future__ import annotations

import asyncio
import json

import pytest

from cirrus.agents.openai_agent import OpenAIAgent
from cirrus.agents.replies import strip_think
from cirrus.evaluate.types import InfrastructureError, TurnRequest
from cirrus.ingest.cassettes import build_cassette, write_cassette
from cirrus.llm.client import ChatClient, RoleConfig
from cirrus.llm.providers import Endpoint
from cirrus.replay import ToolReplayer
from cirrus.schema import ToolExchange
from tests.chat_server import ChatServer, Reply, text, tool_calls

KEY_ENV = "CIRRUS_TEST_REPLIES_KEY"
ARGS = {"billing_cycle": "2025-02"}
TOOLS = [{"type": "function", "function": {
    "name": "QueryInvoiceable", "description": "Invoiceable amount of a billing cycle",
    "parameters": {"type": "object", "properties": {"billing_cycle": {"type": "string"}}}}}]
AS_TEXT = '{"name": "QueryInvoiceable", "arguments": {"billing_cycle": "2025-02"}}'
FENCED = '```json\n{\n  "name": "QueryInvoiceable",\n  "arguments": {\n    "billing_cycle": "2025-02"\n  }\n}\n```'
ANSWER = "2 月份可开票金额为 12,860.00 元。"


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-replies-test")


@pytest.fixture
def workspace(tmp_path):
    exchange = ToolExchange("c1", "QueryInvoiceable", ARGS, [{"amount": "12860.00"}])
    write_cassette(tmp_path / "tool_mocks" / "ZC-1.yaml", build_cassette([exchange]))
    return tmp_path


TASK = {"task_id": "ZC-1", "category": "billing", "language": "zh", "knowledge": [], "tools": TOOLS,
        "history": [], "checkpoints": [], "cassette": "tool_mocks/ZC-1.yaml", "stats": {}}


def respond(server, workspace, task=TASK, *, role_kw=None, **agent_kw):
    async def main():
        settings = {"retry_initial_wait": 0.01, "max_retries": 1, **(role_kw or {})}
        role = RoleConfig(Endpoint("local-model", server.base_url, KEY_ENV), **settings)
        async with ChatClient(role) as client:
            agent = OpenAIAgent(client, **agent_kw)
            with ToolReplayer.for_task(workspace, task) as replayer:
                return await agent.respond(TurnRequest(task, [], "2月份能开多少发票？", 0), replayer)
    return asyncio.run(main())


def kinds(turn):
    return [n["kind"] for n in turn.notes]


# -- tool calls written as text ------------------------------------------------------------


@pytest.mark.parametrize("written", [AS_TEXT, FENCED, f"<tool_call>\n{AS_TEXT}\n</tool_call>"])
def test_off_by_default_the_reply_is_judged_as_text_and_noted(workspace, written):
    with ChatServer([text(written), text("never asked")]) as server:
        turn = respond(server, workspace)
    assert turn.text == written and turn.tool_calls == [] and turn.model_calls == 1
    assert len(server.requests) == 1
    assert turn.messages == [{"role": "assistant", "content": written}]
    [noted] = turn.notes
    assert noted["kind"] == "tool_call_as_text" and noted["tools"] == ["QueryInvoiceable"]
    assert noted["model_call"] == 1 and noted["form"] in ("json", "json_fence", "tool_call_tag")


@pytest.mark.parametrize(("written", "form"), [(AS_TEXT, "json"), (FENCED, "json_fence"),
                                               (f"<tool_call>\n{AS_TEXT}\n</tool_call>", "tool_call_tag")])
def test_on_the_call_is_answered_from_the_cassette_and_marked(workspace, written, form):
    with ChatServer([text(written), text(ANSWER)]) as server:
        turn = respond(server, workspace, text_tool_calls=True)
    assert turn.text == ANSWER and turn.model_calls == 2
    [call] = turn.tool_calls
    assert (call.name, call.arguments, call.result, call.recorded) == ("QueryInvoiceable", ARGS,
                                                                     {"amount": "12860.00"}, True)
    assert call.read_from_text == form and call.record()["read_from_text"] == form
    assert kinds(turn) == ["tool_call_read_from_text"] and turn.notes[0]["form"] == form
    # the history holds a real tool call and its result: the model sees the proper format next time
    assistant, tool, final = turn.messages
    assert assistant["content"] is None and assistant["tool_calls"][0]["function"]["name"] == "QueryInvoiceable"
    assert tool["tool_call_id"] == assistant["tool_calls"][0]["id"] == "text-1-0"
    assert json.loads(tool["content"]) == {"amount": "12860.00"}
    assert server.requests[1]["messages"][-2:] == [assistant, tool]
    assert final == {"role": "assistant", "content": ANSWER}


def test_on_text_around_the_call_stays_the_reply_of_that_call(workspace):
    with ChatServer([text(f"稍等，我查一下。\n{FENCED}"), text(ANSWER)]) as server:
        turn = respond(server, workspace, text_tool_calls=True)
    assert turn.messages[0]["content"] == "稍等，我查一下。" and turn.text == ANSWER


def test_on_arguments_the_recording_does_not_hold_get_the_no_recorded_result_error(workspace):
    """The real trial: ``"billing_cycle": "2月份"`` instead of the recorded 2025-02."""
    wrong = FENCED.replace("2025-02", "2月份")
    with ChatServer([text(wrong), text("抱歉，没有查到。")]) as server:
        turn = respond(server, workspace, text_tool_calls=True)
    [call] = turn.tool_calls
    assert not call.recorded and call.arguments == {"billing_cycle": "2月份"} and call.read_from_text == "json_fence"
    assert "no recorded result" in json.loads(turn.messages[1]["content"])["error"]


def test_on_a_call_written_as_text_on_the_last_allowed_call_is_still_replayed(workspace):
    with ChatServer(rule=lambda body: text(AS_TEXT)) as server:
        turn = respond(server, workspace, text_tool_calls=True, max_model_calls=2)
    assert turn.model_calls == 2 and len(turn.tool_calls) == 2 and turn.text == ""
    assert server.requests[-1]["tool_choice"] == "none"
    assert kinds(turn) == ["tool_call_read_from_text", "tool_call_read_from_text", "empty_reply"]


def test_a_real_tool_call_is_not_read_again_from_its_text(workspace):
    reply = tool_calls(("QueryInvoiceable", ARGS), content=AS_TEXT)
    with ChatServer([reply, text(ANSWER)]) as server:
        turn = respond(server, workspace, text_tool_calls=True)
    [call] = turn.tool_calls
    assert call.read_from_text is None and turn.notes == []


def test_the_option_is_in_the_fingerprint_only_when_on():
    role = RoleConfig(Endpoint("local-model", "http://127.0.0.1:9/v1", None))
    off = OpenAIAgent(ChatClient(role)).fingerprint()
    assert "text_tool_calls" not in off  # runs made before the option resume as they were
    assert OpenAIAgent(ChatClient(role), text_tool_calls=True).fingerprint() == {**off, "text_tool_calls": True}


# -- think blocks ---------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "reply", "reasoning"), [
    ("<think>The customer wants an invoice.</think>\n\nHere it is.", "Here it is.", "The customer wants an invoice."),
    ("<think>\nstill thinking when the limit came", "", "still thinking when the limit came"),
    ("opened in the prompt</think>Answer.", "Answer.", "opened in the prompt"),
    ("<thinking>a</thinking>B<think>c</think>D", "BD", "a\n\nc"),
    ("No reasoning here.", "No reasoning here.", None),
])
def test_strip_think(raw, reply, reasoning):
    assert strip_think(raw) == (reply, reasoning)


def test_a_think_block_is_not_part_of_the_judged_reply_and_is_kept_in_a_note(workspace):
    raw = "<think>查账单之前先确认月份。</think>\n\n" + ANSWER
    with ChatServer([text(raw)]) as server:
        turn = respond(server, workspace)
    assert turn.text == ANSWER and turn.messages == [{"role": "assistant", "content": ANSWER}]
    assert turn.notes == [{"kind": "think_removed", "model_call": 1, "text": "查账单之前先确认月份。"}]


def test_a_tool_call_after_a_think_block_is_read(workspace):
    raw = f"<think>I need the invoice amount.</think>\n<tool_call>\n{AS_TEXT}\n</tool_call>"
    with ChatServer([text(raw), text(ANSWER)]) as server:
        turn = respond(server, workspace, text_tool_calls=True)
    assert turn.tool_calls[0].recorded and turn.text == ANSWER
    assert kinds(turn) == ["think_removed", "tool_call_read_from_text"]


def test_an_unclosed_think_block_leaves_an_empty_reply(workspace):
    with ChatServer([text("<think>Let me consider the billing cycle", finish_reason="length")]) as server:
        turn = respond(server, workspace)
    assert turn.text == "" and kinds(turn) == ["think_removed", "cut_at_max_tokens", "empty_reply"]


# -- empty replies, broken calls ------------------------------------------------------------


def test_an_empty_reply_is_judged_empty_and_noted(workspace):
    with ChatServer([text("")]) as server:
        turn = respond(server, workspace)
    assert turn.text == "" and turn.messages == [{"role": "assistant", "content": ""}]
    assert turn.notes == [{"kind": "empty_reply", "model_call": 1, "tool_calls": 0}]


def test_arguments_that_are_not_json_and_unknown_tools_are_answered_and_noted(workspace):
    script = [tool_calls(("QueryInvoiceable", '{"billing_cycle": 2025-02'), ("RefundEverything", {"all": True})),
              text(ANSWER)]
    with ChatServer(script) as server:
        turn = respond(server, workspace)
    broken, unknown = turn.tool_calls
    assert broken.arguments == '{"billing_cycle": 2025-02' and not broken.recorded
    assert unknown.name == "RefundEverything" and not unknown.recorded
    assert [m["role"] for m in turn.messages] == ["assistant", "tool", "tool", "assistant"]
    assert all("no recorded result" in json.loads(m["content"])["error"] for m in turn.messages[1:3])
    assert turn.notes == [{"kind": "arguments_not_json", "model_call": 1, "tool": "QueryInvoiceable"},
                          {"kind": "unknown_tool", "model_call": 1, "tool": "RefundEverything"}]
    assert turn.text == ANSWER


def test_a_tool_call_tag_that_holds_no_json_is_noted_and_judged_as_text(workspace):
    raw = "<tool_call>QueryInvoiceable(billing_cycle='2025-02')</tool_call>"
    with ChatServer([text(raw)]) as server:
        turn = respond(server, workspace, text_tool_calls=True)
    assert turn.text == raw and turn.tool_calls == []
    assert kinds(turn) == ["tool_call_text_unreadable"]


# -- context overflow and slow first tokens -------------------------------------------------


@pytest.mark.parametrize("said", [
    "the request exceeds the available context size, try increasing it",  # llama.cpp server
    "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",  # vLLM, OpenAI
    "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096",  # TGI
])
def test_a_request_longer_than_the_context_is_an_error_that_says_so(workspace, said):
    with ChatServer([Reply(status=400, error_message=said)]) as server:
        with pytest.raises(InfrastructureError) as caught:
            respond(server, workspace)
    message = str(caught.value)
    assert "input exceeded the model's context window" in message and "HTTP 400" in message
    assert "local-model" in message and said[:40] in message and "tokens sent" in message
    assert len(server.requests) == 1  # a 400 is not retried


def test_another_400_keeps_the_servers_reason(workspace):
    with ChatServer([Reply(status=400, error_message="invalid tool schema")]) as server:
        with pytest.raises(InfrastructureError, match="invalid tool schema") as caught:
            respond(server, workspace)
    assert "context" not in str(caught.value)


def test_a_slow_first_token_needs_the_roles_timeout_raised(workspace):
    """A CPU model may take a minute before its first token: the role's
    ``timeout`` (``[roles.agent] timeout`` in cirrus.toml) is per try, so a
    short one fails the turn and a long enough one waits."""
    with ChatServer([Reply(hang=True)]) as server:
        with pytest.raises(InfrastructureError, match="no complete answer within the 0.2 s timeout"):
            respond(server, workspace, role_kw={"timeout": 0.2, "max_retries": 0})
    with ChatServer([Reply(content=ANSWER, delay=0.3)]) as server:
        assert respond(server, workspace, role_kw={"timeout": 30.0}).text == ANSWER


# -- the other shapes the real trial showed (benchmarks/README.md, "A real model") ----------


NOT_A_TOOL = '```json\n{\n  "name": "Notification Template",\n  "arguments": {\n    "template_code": "Notification"\n  }\n}\n```'


def test_a_call_written_as_text_to_a_tool_that_does_not_exist(workspace):
    intro = "Sure, I can help you with that. Here's a revised template for all your notifications:"
    with ChatServer([text(f"{intro}\n\n{NOT_A_TOOL}")]) as server:
        off = respond(server, workspace)
    assert off.notes[0] == {"kind": "tool_call_as_text", "model_call": 1, "form": "json_fence",
                            "tools": ["Notification Template"]}
    with ChatServer([text(f"{intro}\n\n{NOT_A_TOOL}"), text("I apologize, but I can't assist with that.")]) as server:
        on = respond(server, workspace, text_tool_calls=True)
    [call] = on.tool_calls
    assert call.name == "Notification Template" and not call.recorded and call.read_from_text == "json_fence"
    assert kinds(on) == ["tool_call_read_from_text", "unknown_tool"]
    assert on.messages[0]["content"] == intro


def test_an_echo_of_the_tool_list_cut_at_the_limit_is_text_not_a_call(workspace):
    echoed = ('<tools>\n{"type": "function", "function": {"name": "QueryInvoiceable", "description": '
              '"Tool `QueryInvoiceable` recorded in the ticket logs", "parameters": {"type": "object", '
              '"properties": {"billing_cycle": {"type": "string"}}}}}\n</tools>\n<tools>\n{"type": "func')
    with ChatServer([text(echoed, finish_reason="length")]) as server:
        turn = respond(server, workspace, text_tool_calls=True)
    assert turn.text == echoed and turn.tool_calls == [] and kinds(turn) == ["cut_at_max_tokens"]


def test_the_same_unrecorded_call_again_and_again_ends_within_the_call_limit(workspace):
    """The real trial: the recorded ``2025-02`` asked as ``2月份`` five times, then nothing."""
    wrong = AS_TEXT.replace("2025-02", "2月份")
    with ChatServer([text(FENCED.replace("2025-02", "2月份")), *[text(wrong + "\n")] * 4, text("")]) as server:
        turn = respond(server, workspace, text_tool_calls=True)
    assert turn.model_calls == 6 and len(turn.tool_calls) == 5 and not any(c.recorded for c in turn.tool_calls)
    assert [c.read_from_text for c in turn.tool_calls] == ["json_fence", "json", "json", "json", "json"]
    assert turn.text == "" and turn.notes[-1] == {"kind": "empty_reply", "model_call": 6, "tool_calls": 5}
