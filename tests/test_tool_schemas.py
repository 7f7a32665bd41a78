"""Tool schema inference, loading and merging (cirrus.ingest.tool_schemas)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cirrus.ingest.tool_schemas import ToolSchemaError, infer_tool_schemas, load_tool_schemas, merge_schemas
from cirrus.schema import ToolExchange


def _call(name: str, arguments: Any) -> ToolExchange:
    return ToolExchange("c", name, arguments, ["ok"])


def _by_name(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {tool["function"]["name"]: tool["function"] for tool in tools}


# --- inference -----------------------------------------------------------------


def test_one_schema_per_tool_sorted_with_description() -> None:
    tools = infer_tool_schemas(
        [_call("Zeta", {"a": 1}), _call("Alpha", {"x": "s"}), _call("Zeta", {"a": 2}), _call("Zeta", {"a": 3})]
    )
    assert [t["function"]["name"] for t in tools] == ["Alpha", "Zeta"]
    assert all(t["type"] == "function" for t in tools)
    zeta = tools[1]["function"]
    assert zeta["description"] == "Tool `Zeta` recorded in the ticket logs; arguments inferred from 3 calls."
    assert tools[0]["function"]["description"].endswith("inferred from 1 call.")
    assert zeta["parameters"] == {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def test_scalar_types_and_mixes() -> None:
    calls = [
        _call("T", {"s": "x", "i": 1, "f": 1.5, "b": True, "n": None, "num": 1, "mixed": "a", "opt": None}),
        _call("T", {"s": "y", "i": 2, "f": 2.0, "b": False, "n": None, "num": 2.5, "mixed": 3, "opt": "v"}),
    ]
    properties = _by_name(infer_tool_schemas(calls))["T"]["parameters"]["properties"]
    assert properties["s"] == {"type": "string"}
    assert properties["i"] == {"type": "integer"}
    assert properties["f"] == {"type": "number"}
    assert properties["b"] == {"type": "boolean"}
    assert properties["n"] == {"type": "null"}
    assert properties["num"] == {"type": "number"}  # an int and a float seen
    assert properties["mixed"] == {"type": ["string", "integer"]}
    assert properties["opt"] == {"type": ["string", "null"]}


def test_required_holds_arguments_present_in_every_call() -> None:
    calls = [_call("T", {"id": "a", "verbose": True}), _call("T", {"id": "b"}), _call("T", {"id": "c", "page": 2})]
    parameters = _by_name(infer_tool_schemas(calls))["T"]["parameters"]
    assert list(parameters["properties"]) == ["id", "page", "verbose"]
    assert parameters["required"] == ["id"]


def test_nested_objects_and_arrays() -> None:
    calls = [
        _call("T", {"filter": {"tags": ["a"], "range": {"from": 1}}, "ids": [1, 2], "rows": [{"k": "a", "v": 1}]}),
        _call("T", {"filter": {"tags": [], "range": {"from": 2, "to": 3}}, "ids": [3.5], "rows": [{"k": "b"}]}),
        _call("T", {"filter": {"tags": ["b", "c"]}, "ids": [], "rows": []}),
    ]
    properties = _by_name(infer_tool_schemas(calls))["T"]["parameters"]["properties"]
    assert properties["filter"] == {
        "type": "object",
        "properties": {
            "range": {
                "type": "object",
                "properties": {"from": {"type": "integer"}, "to": {"type": "integer"}},
                "required": ["from"],
            },
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["tags"],
    }
    assert properties["ids"] == {"type": "array", "items": {"type": "number"}}
    assert properties["rows"] == {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"k": {"type": "string"}, "v": {"type": "integer"}},
            "required": ["k"],
        },
    }


def test_unknown_items_and_empty_arguments() -> None:
    tools = _by_name(infer_tool_schemas([_call("T", {"xs": []}), _call("P", None), _call("Q", {})]))
    assert tools["T"]["parameters"]["properties"]["xs"] == {"type": "array", "items": {}}
    assert tools["P"]["parameters"] == {"type": "object", "properties": {}, "required": []}
    assert tools["Q"]["parameters"] == {"type": "object", "properties": {}, "required": []}


def test_non_object_arguments_become_input() -> None:
    tools = _by_name(infer_tool_schemas([_call("T", "i-bp1abc"), _call("T", '{"input": "x"}'), _call("L", [1, 2])]))
    assert tools["T"]["parameters"] == {
        "type": "object",
        "properties": {"input": {"type": "string"}},
        "required": ["input"],
    }
    assert tools["L"]["parameters"]["properties"]["input"] == {"type": "array", "items": {"type": "integer"}}


def test_json_string_arguments_are_read_as_objects() -> None:
    tools = _by_name(infer_tool_schemas([_call("T", '{"id": "a", "n": 1}')]))
    assert tools["T"]["parameters"]["required"] == ["id", "n"]


def test_inference_is_deterministic_and_names_made_valid() -> None:
    calls = [_call("ecs.Describe", {"b": 1, "a": "x"}), _call("ecs.Describe", {"a": "y"}), _call("Other", [1])]
    one = infer_tool_schemas(calls)
    two = infer_tool_schemas(list(reversed(calls)))
    assert json.dumps(one) == json.dumps(two)
    assert [t["function"]["name"] for t in one] == ["Other", "ecs_Describe"]


# --- loading -----------------------------------------------------------------

TOOL = {
    "type": "function",
    "function": {
        "name": "DescribeInstance",
        "description": "Describe an ECS instance.",
        "parameters": {
            "type": "object",
            "properties": {"instance_id": {"type": "string", "description": "The instance id"}},
            "required": ["instance_id"],
        },
    },
}
BARE = {"name": "Ping", "description": "Is the service up?"}


def test_load_json_tool_objects(tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([TOOL, BARE]), encoding="utf-8")
    tools = load_tool_schemas(path)
    assert list(tools) == ["DescribeInstance", "Ping"]
    assert tools["DescribeInstance"] == TOOL
    assert tools["Ping"] == {
        "type": "function",
        "function": {
            "name": "Ping",
            "description": "Is the service up?",
            "parameters": {"type": "object", "properties": {}},
        },
    }


def test_load_yaml_bare_functions(tmp_path: Path) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(
        """
- name: DescribeInstance
  description: Describe an ECS instance.
  parameters:
    type: object
    properties:
      instance_id: {type: string, description: The instance id}
    required: [instance_id]
- name: ecs.Reboot
  parameters: {type: object, properties: {force: {type: boolean}}}
""",
        encoding="utf-8",
    )
    tools = load_tool_schemas(path)
    assert tools["DescribeInstance"] == TOOL
    assert tools["ecs_Reboot"]["function"]["name"] == "ecs_Reboot"  # made valid like ingest does


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"name": "x"}', "expected a list of tool schemas"),
        ('[{"name": "ok"}, "nope"]', "entry 2: expected an object"),
        ('[{"description": "no name"}]', 'entry 1: "name" is missing'),
        ('[{"type": "function", "function": {"name": ""}}]', 'entry 1: "name" is missing'),
        ('[{"type": "retrieval", "name": "x"}]', 'entry 1: a tool object needs "type": "function"'),
        ('[{"name": "Bad", "parameters": {"type": "array"}}]', "entry 1 ('Bad'): \"parameters\" must be a JSON schema"),
        ('[{"name": "Bad", "parameters": "x"}]', "entry 1 ('Bad'): \"parameters\" must be"),
        (
            '[{"name": "Bad", "parameters": {"type": "object", "properties": []}}]',
            "entry 1 ('Bad'): \"parameters.properties\"",
        ),
        (
            '[{"name": "Bad", "parameters": {"type": "object", "properties": {}, "required": ["a"]}}]',
            "entry 1 ('Bad'): \"parameters.required\" names unknown arguments: a",
        ),
        ('[{"name": "Bad", "description": 3}]', "entry 1 ('Bad'): \"description\" must be a string"),
        ('[{"name": "A"}, {"name": "B"}, {"name": "A"}]', "entry 3: tool 'A' is already defined by entry 1"),
        ('[{"name": "A", ', "not valid JSON"),
    ],
)
def test_load_bad_json_names_file_and_entry(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "tools.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ToolSchemaError) as caught:
        load_tool_schemas(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_load_bad_yaml(tmp_path: Path) -> None:
    path = tmp_path / "tools.yml"
    path.write_text("- name: A\n  parameters: [unclosed\n", encoding="utf-8")
    with pytest.raises(ToolSchemaError, match="not valid YAML"):
        load_tool_schemas(path)
    path.write_text("- name: A\n- parameters: {type: object}\n", encoding="utf-8")
    with pytest.raises(ToolSchemaError, match=r"tools\.yml: entry 2: \"name\" is missing"):
        load_tool_schemas(path)


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ToolSchemaError, match="cannot read"):
        load_tool_schemas(tmp_path / "absent.json")


# --- merging -----------------------------------------------------------------


def test_provided_schemas_win_by_name(tmp_path: Path) -> None:
    inferred = infer_tool_schemas([_call("DescribeInstance", {"instance_id": "i-1"}), _call("Zed", {})])
    provided = {"DescribeInstance": TOOL, "Unused": {"type": "function", "function": BARE | {"name": "Unused"}}}
    merged = merge_schemas(inferred, provided)
    assert [t["function"]["name"] for t in merged] == ["DescribeInstance", "Zed"]
    assert merged[0] is TOOL
    everything = merge_schemas(inferred, provided, include_unused=True)
    assert [t["function"]["name"] for t in everything] == ["DescribeInstance", "Unused", "Zed"]
