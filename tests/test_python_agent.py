"""An agent written in Python (cirrus.agents.loader, cirrus.agents.api):
good and bad ``module:factory`` specs, what the agent sees and what Cirrus
fills in of its turn."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from cirrus.agents import api, prompts
from cirrus.agents.loader import AgentLoadError, load_agent, parse_spec
from cirrus.agents.python_agent import PythonAgent
from cirrus.evaluate.types import InfrastructureError
from cirrus.ingest.cassettes import build_cassette, write_cassette
from cirrus.offline import count_tokens
from cirrus.replay import ToolReplayer
from cirrus.schema import ToolExchange
from cirrus.usage import UsageLedger, recording
from tests import agent_factories
from tests.scripted_models import TOOL_ARGS, make_task

MODULE = "tests.agent_factories"


@pytest.fixture(autouse=True)
def _clean_path(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_agent may add the search path


@pytest.fixture
def workspace(tmp_path):
    task = make_task("T-tool", True)
    task["checkpoints"][0]["reply"] = "REFERENCE-never-seen"
    exchange = ToolExchange("c1", "DescribeInstance", TOOL_ARGS, [{"status": "Running"}])
    write_cassette(tmp_path / task["cassette"], build_cassette([exchange]))
    return tmp_path, task


def turn_of(agent, workspace, history=(), query="customer question 1"):
    root, task = workspace

    async def main():
        with recording(UsageLedger()) as ledger, ToolReplayer.for_task(root, task) as replayer:
            turn = await agent.respond(api.TurnRequest(task, list(history), query, 0), replayer)
        return turn, ledger
    return asyncio.run(main())


def test_a_factory_gets_the_context_it_names_and_the_tasks_public_view(workspace, tmp_path):
    root, task = workspace
    agent = load_agent(f"{MODULE}:make_agent", workspace=root, tasks=[task], run_id="ignored")
    assert isinstance(agent, PythonAgent) and agent.name == "py-perfect" and agent.offline is False
    given = agent_factories.CONTEXTS[-1]
    assert given["workspace"] == root
    assert given["tasks"] == [api.public_task(task)] and "checkpoints" not in given["tasks"][0]
    load_agent(f"{MODULE}:make_without_context", workspace=root, tasks=[task])  # takes none: given none
    anything = load_agent(f"{MODULE}:make_with_anything", workspace=root, tasks=[task], mode="failer")
    assert anything.name == "py-failer"
    assert load_agent(f"{MODULE}:Factories.create").name == "py-jumper"
    klass = load_agent(f"{MODULE}:ScriptedAgent", tasks=[task])
    assert klass.fingerprint() == {"kind": "python", "spec": f"{MODULE}:ScriptedAgent", "api_version": 1,
                                   "version": "0.9", "agent": {"mode": "perfect"}}
    assert klass.details() == {"agent_kind": "python", "agent_spec": f"{MODULE}:ScriptedAgent",
                               "agent_version": "0.9"}


def test_a_turn_sees_no_reference_and_cirrus_fills_in_the_rest(workspace):
    agent = load_agent(f"{MODULE}:make_agent", workspace=workspace[0], tasks=[])
    turn, ledger = turn_of(agent, workspace)
    seen = agent_factories.SEEN[-1]
    assert set(seen.task) == {"task_id", "category", "knowledge", "tools", "history"}
    assert "REFERENCE-never-seen" not in repr(seen)
    assert turn.text == "ANSWER-1" and turn.output_tokens == 8 and turn.model_calls == 2 and turn.wall_s > 0
    assert [(c.name, c.arguments, c.result, c.recorded) for c in turn.tool_calls] == [
        ("DescribeInstance", TOOL_ARGS, {"status": "Running"}, True)]
    call = turn.messages[0]["tool_calls"][0]
    assert [m["role"] for m in turn.messages] == ["assistant", "tool", "assistant"]
    assert turn.messages[1] == {"role": "tool", "tool_call_id": call["id"], "content": '{"status": "Running"}'}
    assert turn.messages[2] == {"role": "assistant", "content": "ANSWER-1"}
    usage = ledger.clients["agent"]
    assert (usage.calls, usage.input_tokens, usage.output_tokens) == (2, 20, 8)


def test_the_tools_record_every_call_and_an_unrecorded_one_raises(workspace):
    class Agent:
        async def respond(self, request, tools):
            result = tools.call("DescribeInstance", '{"instance_id": "i-bp***c"}')
            try:
                tools.call("DescribeInstance", {"instance_id": "someone-else"})
            except api.NoRecordedResult:
                pass
            return api.AgentTurn(text=f"It is {result['status']}.",
                                 tool_calls=[api.ToolCallMade("Invented", {}, "made up", recorded=True)])

    turn, _ = turn_of(PythonAgent(Agent(), "inline:Agent"), workspace)
    assert [(c.arguments, c.recorded) for c in turn.tool_calls] == [(TOOL_ARGS, True),
                                                                   ({"instance_id": "someone-else"}, False)]
    assert turn.notes == [{"kind": "tool_calls_from_tools", "reported": 1, "made": 2}]
    assert turn.messages[2]["content"] == prompts.no_recorded_result_content()
    counted = count_tokens("It is Running.") + sum(
        count_tokens(part) for part in ("DescribeInstance", '{"instance_id": "i-bp***c"}', "DescribeInstance",
                                        '{"instance_id": "someone-else"}'))
    assert turn.output_tokens == counted  # the agent reported none: counted offline


def test_a_history_changed_by_the_agent_changes_nothing_of_the_walk(workspace):
    class Agent:
        async def respond(self, request, tools):
            request.history.clear()
            request.task["history"].append({"role": "user", "content": "injected"})
            return api.AgentTurn(text="ok")

    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    turn_of(PythonAgent(Agent(), "inline:Agent"), workspace, history=history)
    assert len(history) == 2 and workspace[1]["history"] == []


@pytest.mark.parametrize(("factory", "message"), [
    ("returns_text", "returned str, not an AgentTurn: return cirrus.agents.api.AgentTurn(text=...)"),
    ("raises_in_respond", "raised KeyError: 'order_id'"),
    ("lets_no_recorded_result_escape", "did not catch NoRecordedResult"),
])
def test_a_broken_turn_is_an_infrastructure_error_naming_the_agent(workspace, factory, message):
    agent = load_agent(f"{MODULE}:{factory}")
    with pytest.raises(InfrastructureError) as error:
        turn_of(agent, workspace)
    assert message in str(error.value) and f"{MODULE}:{factory}" in str(error.value)


def test_a_refused_credential_still_stops_the_run(workspace):
    class Agent:
        async def respond(self, request, tools):
            raise api.ModelAuthError("my model refused the key: set MY_KEY")

    with pytest.raises(api.ModelAuthError):
        turn_of(PythonAgent(Agent(), "inline:Agent"), workspace)


@pytest.mark.parametrize(("spec", "message"), [
    ("tests.agent_factories", "is not MODULE:FACTORY"),
    ("", "is not MODULE:FACTORY"),
    ("tests/agent_factories.py:make_agent", "is not a module's import path"),
    ("tests.agent_factories:", "is not the name of a function or class"),
    ("tests.agent_factories:a:b", "is not the name of a function or class"),
    ("tests.no_such_module:make", "no module 'tests.no_such_module' is importable here: install the package"),
    ("nosuchpkg_cirrus.agent:make", "no module 'nosuchpkg_cirrus' is importable here"),
    ("tests.agent_factories:nothing_here", "has no attribute 'nothing_here'; it defines "),
    ("tests.agent_factories:Factories.missing", "tests.agent_factories:Factories has no attribute 'missing'"),
    ("tests.agent_factories:NOT_CALLABLE", "'NOT_CALLABLE' is a int, not callable"),
    ("tests.agent_factories:no_respond", "returned a object, which has no respond method"),
    ("tests.agent_factories:sync_respond", "is not async: define it as `async def respond(self, request, tools)"),
    ("tests.agent_factories:one_argument", "does not take (request, tools)"),
    ("tests.agent_factories:raises", "the factory raised RuntimeError: the model file is missing"),
    ("tests.agent_factories:needs_more", "the factory needs model_path, which Cirrus does not give"),
    ("tests.agent_factories:async_factory", "the factory is async"),
])
def test_every_bad_spec_says_what_to_fix(spec, message):
    with pytest.raises(AgentLoadError) as error:
        load_agent(spec, workspace=None, tasks=[])
    assert message in str(error.value)


def test_modules_that_fail_to_import_are_told_apart(tmp_path):
    (tmp_path / "cirrus_test_broken_agent.py").write_text("raise ValueError('config missing')\n")
    (tmp_path / "cirrus_test_needy_agent.py").write_text("import cirrus_no_such_dependency\n")
    (tmp_path / "cirrus_test_local_agent.py").write_text(
        "from tests.agent_factories import ScriptedAgent\n\ndef make():\n    return ScriptedAgent('disfluent')\n")
    try:
        with pytest.raises(AgentLoadError, match="importing module 'cirrus_test_broken_agent' failed with "
                                                 "ValueError: config missing"):
            load_agent("cirrus_test_broken_agent:make", search_path=tmp_path)
        with pytest.raises(AgentLoadError, match="imports 'cirrus_no_such_dependency', which is not installed"):
            load_agent("cirrus_test_needy_agent:make", search_path=tmp_path)
        # a module in the folder cirrus runs from (the default search path) is found
        assert load_agent("cirrus_test_local_agent:make", search_path=tmp_path).name == "py-disfluent"
    finally:
        for name in ("cirrus_test_broken_agent", "cirrus_test_needy_agent", "cirrus_test_local_agent"):
            sys.modules.pop(name, None)


def test_parse_spec():
    assert parse_spec("pkg.mod:Class.create") == ("pkg.mod", "Class.create")
    assert parse_spec(" pkg:make ") == ("pkg", "make")


def test_the_public_interface_is_importable_from_one_place():
    for name in api.__all__:
        assert hasattr(api, name), name
    assert isinstance(agent_factories.ScriptedAgent(), api.Agent)
    assert api.PUBLIC_TASK_FIELDS == ("task_id", "category", "channel", "language", "knowledge", "tools", "history",
                                      "context")


def test_the_public_view_drops_cirrus_replay_rules():
    task = json.loads(json.dumps(make_task("T-tool", True)))  # a copy: make_task shares its tool schema
    task["tools"][0]["function"]["parameters"]["properties"]["instance_id"]["x-cirrus-match"] = "ignored"
    view = api.public_task(task)
    assert "x-cirrus-match" not in json.dumps(view) and "x-cirrus-match" in json.dumps(task)


def test_a_fingerprint_that_is_not_json_is_refused():
    class Agent:
        def fingerprint(self):
            return {"model": object()}

        async def respond(self, request, tools):
            return api.AgentTurn(text="")

    with pytest.raises(ValueError, match="fingerprint\\(\\) must return JSON-able data"):
        PythonAgent(Agent(), "inline:Agent").fingerprint()


def test_a_tool_view_gives_the_agent_its_own_tool_names(workspace):
    class Agent:
        async def respond(self, request, tools):
            assert [t["function"]["name"] for t in request.task["tools"]] == ["lookup_instance"]
            result = tools.call("lookup_instance", {"id": "i-bp***c"})
            return api.AgentTurn(text=result["status"])

    view = agent_factories.RenamedTools()
    view.recorded_call = lambda name, arguments: ("DescribeInstance", {"instance_id": arguments["id"]})
    turn, _ = turn_of(PythonAgent(Agent(), "inline:Agent", tool_view=lambda task: view), workspace)
    assert turn.text == "Running"
    assert [(c.name, c.arguments, c.recorded) for c in turn.tool_calls] == [("DescribeInstance", TOOL_ARGS, True)]
