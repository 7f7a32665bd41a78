"""`[agent]`: your agent's prompt template, knowledge placement, tool set,
tool and argument names and matching (issue 24, item 2), as a library:
parsing with errors that name the key, the template's variables (never the
reference), the tools as the agent sees them and the way back to the
recorded calls."""

from __future__ import annotations

import json

import pytest

from cirrus.agents.config import (
    AgentConfigError,
    load_agent_config,
    parse_agent_config,
    render_template,
    template_context,
    tool_view,
    workspace_tools,
)
from cirrus.tool_matching import match_key

ORDER = {"type": "function", "function": {"name": "QueryOrder", "description": "Look up an order", "parameters": {
    "type": "object", "properties": {"order_id": {"type": "string"}, "note": {"type": "string",
                                                                               "x-cirrus-match": "ignored"}},
    "required": ["order_id"]}}}
REFUND = {"type": "function", "function": {"name": "CreateRefund", "parameters": {
    "type": "object", "properties": {"order_id": {"type": "string"}, "reason": {"type": "string"}}}}}
TASK = {"task_id": "T-9", "category": "Delivery", "channel": "online-chat", "language": "zh",
        "knowledge": [{"doc_id": "kb-1", "title": "Returns", "text": "Returns within 30 days."}],
        "tools": [ORDER], "checkpoints": [{"query": "q", "reply": "THE REFERENCE ANSWER", "tool_calls": []}]}


def test_a_config_file_with_or_without_its_table(tmp_path):
    (tmp_path / "prompt.j2").write_text("You are Mia of {{ domain }}.")
    full = tmp_path / "agent.toml"
    full.write_text('[agent]\nlabel = "v2.3"\nsystem_prompt_file = "prompt.j2"\nknowledge = "message"\n'
                    'tool_set = "ticket"\nmax_model_calls = 4\n\n[agent.tools.QueryOrder]\nname = "lookup_order"\n'
                    'arguments = { order = "order_id" }\nmatch = { note = "ignored" }\n')
    config = load_agent_config(full)
    assert (config.label, config.knowledge, config.tool_set, config.max_model_calls) == ("v2.3", "message", "ticket", 4)
    assert config.template_text() == "You are Mia of {{ domain }}."  # relative to the config file
    bare = tmp_path / "bare.toml"
    bare.write_text('label = "v1"\n')
    assert load_agent_config(bare).label == "v1"
    # the digest follows what the agent sees, not the label or where the template lives
    moved = tmp_path / "other"
    moved.mkdir()
    (moved / "p.j2").write_text("You are Mia of {{ domain }}.")
    relabelled = parse_agent_config({**{k: v for k, v in config.model_dump(exclude={"base_dir"}).items()
                                        if k not in ("system_prompt_file", "label")},
                                     "label": "v9", "system_prompt_file": "p.j2"}, "x", moved)
    assert relabelled.digest() == config.digest()
    assert parse_agent_config({"max_model_calls": 5}, "x").digest() != parse_agent_config({}, "x").digest()


@pytest.mark.parametrize("table, message", [
    ({"knowledge": "sidebar"}, "[agent] knowledge: Input should be 'system', 'message', 'tool' or 'none'"),
    ({"tool_set": "all"}, "[agent] tool_set"),
    ({"max_model_calls": 0}, "[agent] max_model_calls"),
    ({"tools": {"QueryOrder": {"match": {"note": "fuzzy"}}}}, "match.note is 'fuzzy'"),
    ({"tools": {"QueryOrder": {"name": "has space"}}}, "[agent] tools.QueryOrder.name"),
    ({"colour": "blue"}, "[agent] colour: Extra inputs are not permitted"),
    ({"system_prompt_file": "missing.j2"}, "system_prompt_file"),
])
def test_bad_tables_name_the_key(table, message, tmp_path):
    with pytest.raises(AgentConfigError) as caught:
        parse_agent_config(table, "cirrus.toml", tmp_path)
    assert message in str(caught.value) and ("cirrus.toml" in str(caught.value) or "missing.j2" in str(caught.value))
    with pytest.raises(AgentConfigError, match="both system_prompt and system_prompt_file"):
        parse_agent_config({"system_prompt": "a", "system_prompt_file": "b"}, "x").template_text()


def test_the_template_sees_the_task_but_never_its_reference():
    view = tool_view([ORDER], None)
    context = template_context(TASK, view.schemas, "a shop")
    assert context["tools"] == [{"name": "QueryOrder", "description": "Look up an order"}]
    assert "THE REFERENCE ANSWER" not in json.dumps(context, ensure_ascii=False)
    text = render_template("{{ domain }} / {{ language }} / {{ category }} / {{ channel }} / {{ task_id }}\n"
                           "{% for t in tools %}{{ t.name }}{% endfor %} / {{ knowledge[0].title }}\n{{ knowledge_text }}",
                           context)
    assert text.startswith("a shop / zh / Delivery / online-chat / T-9\nQueryOrder / Returns\n## Returns (kb-1)")
    with pytest.raises(AgentConfigError, match="'reference' is undefined; the template may use task_id"):
        render_template("{{ reference }}", context)
    with pytest.raises(AgentConfigError, match="TemplateSyntaxError"):
        render_template("{% for %}", context)
    with pytest.raises(Exception):  # the sandbox: no attribute walking to Python internals
        render_template("{{ tools.__class__.__mro__ }}", context)


def test_renamed_tools_reach_the_recorded_calls():
    config = parse_agent_config({"tools": {"QueryOrder": {"name": "lookup_order", "description": "Find an order",
                                                          "arguments": {"order": "order_id"},
                                                          "match": {"order_id": "normalized"}}}}, "x")
    view = tool_view([ORDER, REFUND], config, {"QueryOrder": {"note": "ignored"}})
    sent = view.schemas[0]["function"]
    assert sent["name"] == "lookup_order" and sent["description"] == "Find an order"
    assert set(sent["parameters"]["properties"]) == {"order", "note"} and sent["parameters"]["required"] == ["order"]
    assert "x-cirrus-match" not in json.dumps(view.schemas)  # the rules stay Cirrus's
    assert view.schemas[1]["function"]["name"] == "CreateRefund"  # not configured: as recorded
    name, args = view.recorded_call("lookup_order", '{"order": "OD-***41 ", "note": "asap"}')
    assert (name, args) == ("QueryOrder", {"order_id": "OD-***41 ", "note": "asap"})
    assert view.matching == {"QueryOrder": {"note": "ignored", "order_id": "normalized"}}
    assert match_key(name, args, view.matching) == match_key("QueryOrder", {"order_id": "od-***41"}, view.matching)
    assert view.recorded_call("CreateRefund", "not json") == ("CreateRefund", "not json")
    assert view.recorded_call("lookup_order", "not json") == ("QueryOrder", "not json")
    with pytest.raises(AgentConfigError, match="does not know: Nope"):
        tool_view([ORDER], parse_agent_config({"tools": {"Nope": {"name": "x"}}}, "x"))
    with pytest.raises(AgentConfigError, match="two tools the name 'QueryOrder'"):
        tool_view([ORDER, REFUND], parse_agent_config({"tools": {"CreateRefund": {"name": "QueryOrder"}}}, "x"))


def test_the_workspace_tool_set_is_the_union_of_the_tasks_tools():
    tasks = [{"tools": [ORDER]}, {"tools": []}, {"tools": [REFUND, ORDER]}, {}]
    assert [t["function"]["name"] for t in workspace_tools(tasks)] == ["QueryOrder", "CreateRefund"]
