"""Reading tool calls a model wrote as text (cirrus.agents.text_tool_calls):
the forms real models answer with, and what is not a call."""

from __future__ import annotations

import json

import pytest

from cirrus.agents.text_tool_calls import read_text_tool_calls

TOOLS = {"QueryInvoice", "QueryInvoiceable", "DescribeInstanceStatus"}
ARGS = {"billing_cycle": "2025-02"}


def calls(text: str) -> list[tuple[str, object]]:
    found = read_text_tool_calls(text, TOOLS)
    assert found is not None, text
    return [(c["name"], json.loads(c["arguments"])) for c in found.calls]


# what Qwen2.5-Coder-0.5B answered through llama.cpp's server (benchmarks/real_model.py)
QWEN_BARE = '{"name": "QueryInvoice", "arguments": {"billing_cycle": "2025-02"}}'
QWEN_FENCED = '```json\n{\n  "name": "QueryInvoice",\n  "arguments": {\n    "billing_cycle": "2025-02"\n  }\n}\n```'


@pytest.mark.parametrize(("text", "form"), [
    (QWEN_BARE, "json"),
    (QWEN_FENCED, "json_fence"),
    ("```\n" + QWEN_BARE + "\n```", "json_fence"),
    ("```tool_call\n" + QWEN_BARE + "\n```", "json_fence"),
    ("<tool_call>\n" + QWEN_BARE + "\n</tool_call>", "tool_call_tag"),
    ("<tool_call>" + QWEN_BARE, "tool_call_tag"),  # unclosed: cut at the output limit
    ("<function_call>" + QWEN_BARE + "</function_call>", "tool_call_tag"),
    ('{"type": "function", "function": {"name": "QueryInvoice", "arguments": {"billing_cycle": "2025-02"}}}', "json"),
    ('{"function": {"name": "QueryInvoice", "arguments": "{\\"billing_cycle\\": \\"2025-02\\"}"}}', "json"),
    ('{"name": "QueryInvoice", "parameters": {"billing_cycle": "2025-02"}}', "json"),
    ('{"tool_calls": [' + QWEN_BARE + "]}", "json"),
    ("[TOOL_CALLS] [" + QWEN_BARE + "]", "marker"),
    ('<|python_tag|>{"name": "QueryInvoice", "parameters": {"billing_cycle": "2025-02"}}', "marker"),
])
def test_each_form_is_read_as_one_call(text, form):
    found = read_text_tool_calls(text, TOOLS)
    assert found is not None and found.form == form
    assert calls(text) == [("QueryInvoice", ARGS)]
    assert found.rest == ""


def test_arguments_as_a_json_string_stay_the_models_string():
    found = read_text_tool_calls('{"name": "QueryInvoice", "arguments": "{\\"billing_cycle\\": \\"2025-02\\"}"}')
    assert found is not None and found.calls[0]["arguments"] == '{"billing_cycle": "2025-02"}'


def test_a_list_and_several_tags_give_every_call_in_order():
    second = '{"name": "QueryInvoiceable", "arguments": {"billing_cycle": "2025-02"}}'
    assert calls(f"[{QWEN_BARE}, {second}]") == [("QueryInvoice", ARGS), ("QueryInvoiceable", ARGS)]
    tagged = f"<tool_call>{QWEN_BARE}</tool_call>\n<tool_call>{second}</tool_call>"
    assert calls(tagged) == [("QueryInvoice", ARGS), ("QueryInvoiceable", ARGS)]


def test_text_around_the_calls_is_kept_as_the_rest():
    text = f"Let me check your invoice.\n\n{QWEN_FENCED}\n\nOne moment please."
    found = read_text_tool_calls(text, TOOLS)
    assert found is not None and found.rest == "Let me check your invoice.\n\nOne moment please."
    bare = read_text_tool_calls(f"I will look it up:\n{QWEN_BARE}", TOOLS)
    assert bare is not None and bare.rest == "I will look it up:" and bare.form == "json"


def test_a_name_alone_counts_only_for_an_offered_tool():
    assert calls('{"name": "DescribeInstanceStatus"}') == [("DescribeInstanceStatus", {})]
    assert read_text_tool_calls('{"name": "Alice"}', TOOLS) is None


def test_an_unknown_tool_written_as_a_call_is_still_a_call():
    """Shape decides, not the name: the call is answered with the "no
    recorded result" error like a real call to a tool that does not exist."""
    assert calls('{"name": "RebootEverything", "arguments": {}}') == [("RebootEverything", {})]


@pytest.mark.parametrize("text", [
    "Your invoice for February is 12,860.00 CNY.",
    '{"status": "ok", "balance": 200}',  # JSON with no call's shape
    '{"name": "Alice", "age": 30, "arguments": {}}',  # more fields than a call has
    'Send {"name": "QueryInvoice", "arguments": {}} to the API.',  # JSON inside a sentence
    "```python\nprint({'name': 'x'})\n```",
    "```bash\n" + QWEN_BARE + "\n```",  # a fence of another language
    "[1] Open the console.\n[2] Click Billing.",
    "",
])
def test_replies_that_are_not_calls(text):
    assert read_text_tool_calls(text, TOOLS) is None


def test_a_tool_call_tag_without_json_is_reported_unreadable():
    found = read_text_tool_calls("<tool_call>QueryInvoice(billing_cycle=2025-02)</tool_call>", TOOLS)
    assert found is not None and found.calls == [] and found.unreadable == ["QueryInvoice(billing_cycle=2025-02)"]


def test_openai_calls_have_ids_and_function_shape():
    found = read_text_tool_calls(QWEN_BARE, TOOLS)
    assert found is not None
    assert found.openai_calls("text-1") == [{"id": "text-1-0", "type": "function", "function": {
        "name": "QueryInvoice", "arguments": json.dumps(ARGS)}}]
