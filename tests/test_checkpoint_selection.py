"""Checkpoint selection at ingest (``cirrus ingest --checkpoints select``):
the rule selector on a labelled set, task building with ``context``, the
LLM selector against a scripted endpoint, ingest end to end, and the walk
over a task with contexts (docs/checkpoints.md)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from cirrus.config import load_pipeline
from cirrus.evaluate.types import AgentTurn as EvalTurn
from cirrus.evaluate.types import Verdict
from cirrus.evaluate.walk import walk
from cirrus.ingest.annotate.base import ReplyToLabel
from cirrus.ingest.annotate.rules import RuleAnnotator
from cirrus.ingest.annotate.select import AllSelector, RuleSelector, Selection, at_least_one, count_words, similarity
from cirrus.ingest.annotate.select_llm import LLMSelector, MalformedSelection, parse_selection
from cirrus.ingest.tasks import Dialogue, assemble, build_task
from cirrus.llm.providers import Endpoint, ModelAuthError
from cirrus.replay import ToolReplayer
from cirrus.schema import AgentTurn, CustomerTurn, Task, ToolExchange
from tests.conftest import REPO, SAMPLE_KB, SAMPLE_RAW
from tests.fake_openai import FakeOpenAI

LABELLED = Path(__file__).parent / "data" / "checkpoint_selection.jsonl"


def _selector(pipeline_config, language: str) -> RuleSelector:
    annotate = pipeline_config.annotate_for(language)
    return RuleSelector.from_config(RuleAnnotator.from_config(annotate), pipeline_config.select_for(language), annotate)


# --- the rule selector ------------------------------------------------------


def test_rule_selector_accuracy_on_the_labelled_set(pipeline_config):
    """60 agent replies in their place in a dialogue (33 English, 27
    Chinese), labelled keep/drop by hand; the selector decides the last
    reply of each (after its ``previous`` one, for the repeats)."""
    examples = [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(examples) == 60
    right: dict[str, list[bool]] = {"en": [], "zh": []}
    wrong = []
    for example in examples:
        selector = _selector(pipeline_config, example["lang"])
        items = [ReplyToLabel("", example["previous"])] if "previous" in example else []
        items.append(ReplyToLabel(example["query"], example["reply"], tuple(example.get("tools", []))))
        decided = selector.select(items).keep[-1]
        right[example["lang"]].append(decided == example["keep"])
        if decided != example["keep"]:
            wrong.append(example["id"])
    accuracy = {lang: sum(v) / len(v) for lang, v in right.items()}
    overall = sum(sum(v) for v in right.values()) / len(examples)
    print(f"rule selector accuracy: {overall:.3f} overall, en {accuracy['en']:.3f}, zh {accuracy['zh']:.3f}; "
          f"wrong: {wrong}")
    assert overall >= 0.9 and min(accuracy.values()) >= 0.85, wrong
    # both classes are present, so a selector that keeps (or drops) all cannot pass: 30 keep (en 17 + zh 13), 30 drop
    assert sum(e["keep"] for e in examples) == 30


def test_rule_selector_reasons(pipeline_config):
    selector = _selector(pipeline_config, "en")
    items = [
        ReplyToLabel("hi", "Hello! How can I help you today?"),
        ReplyToLabel("my VM is down", "One moment please.", ("DescribeInstance",)),
        ReplyToLabel("ok", "Your instance i-1*** is stopped; start it from the console."),
        ReplyToLabel("ok", "Your instance i-1*** is stopped, start it from the console!"),
        ReplyToLabel("why", "I'm sorry about that."),
        ReplyToLabel("thanks", "You're welcome, Ja***. Have a nice day!"),
    ]
    labels = selector.annotator.label(items)
    assert [r.split(":")[0] for r in selector.reasons(items, labels)] == ["drop", "keep", "keep", "drop", "drop",
                                                                         "drop"]
    assert selector.reasons(items, labels)[1] == "keep:tool calls"
    assert selector.reasons(items, labels)[3] == "drop:repeat"
    assert selector.reasons(items, labels)[5] == "drop:filler"


def test_word_counts_and_similarity():
    # Han characters 退 款 个 工 作 日 = 6; Latin/digit words "3-5", "to", "card" = 3
    assert count_words("退款3-5个工作日 to card") == 6 + 3
    assert count_words("请稍等 one moment") == 3 + 2  # 请,稍,等 + one, moment
    assert similarity("Done!", "done") == 1.0  # case and punctuation do not count
    assert similarity("", "x") == 0.0
    assert similarity("abcd", "abxy") == 0.5  # difflib: 2 * 2 matching / 8 characters


def test_at_least_one_keeps_the_last_turn_with_text_or_calls():
    items = [ReplyToLabel("a", "hello"), ReplyToLabel("b", "one moment"), ReplyToLabel("c", "")]
    nothing = Selection(("Appease", "Appease", "Solution"), (False, False, False))
    assert at_least_one(nothing, items).keep == (False, True, False)  # the third has neither text nor calls
    kept = Selection(("Appease", "Solution", "Solution"), (False, True, False))
    assert at_least_one(kept, items) is kept


# --- building tasks with context ---------------------------------------------


def _agent(text: str, *calls: str) -> AgentTurn:
    return AgentTurn([text] if text else [], [ToolExchange(f"c-{n}", n, {"x": 1}, [{"ok": True}]) for n in calls])


def _dialogue() -> Dialogue:
    """G (agent, before any customer) U1 A1 U2 A2(+tool) U3 A3 U4 A4 U5 A5."""
    return Dialogue.split([
        _agent("Welcome."),
        CustomerTurn("U1"), _agent("A1 hello"),
        CustomerTurn("U2"), _agent("A2 answer", "Lookup"),
        CustomerTurn("U3"), _agent("A3 one moment"),
        CustomerTurn("U4"), _agent("A4 answer"),
        CustomerTurn("U5"), _agent("A5 bye"),
    ])


class FixedSelector:
    name = "fixed"

    def __init__(self, keep: list[bool]) -> None:
        self.keep = keep

    def select(self, items: list[ReplyToLabel]) -> Selection:
        assert len(items) == len(self.keep)
        return Selection(("Solution",) * len(items), tuple(self.keep))


def _build(keep: list[bool]) -> Task:
    return build_task(task_id="T-1", category=None, channel=None, language="en", dialogue=_dialogue(),
                      knowledge=[], tools=[], cassette=None, selector=FixedSelector(keep))


def _contents(messages: list[dict]) -> list[str]:
    return [m["content"] if m["content"] is not None else "call:" + m["tool_calls"][0]["function"]["name"]
            if m["role"] == "assistant" else f"{m['role']}:{m['content']}" for m in messages]


def _no_two_users_in_a_row(task: Task) -> None:
    roles = [m["role"] for m in task.history]
    for checkpoint in task.checkpoints:
        roles += [m["role"] for m in checkpoint.context or []] + ["user", "assistant"]
    assert all(not (a == b == "user") for a, b in zip(roles, roles[1:])), roles


def test_an_unselected_first_turn_joins_history_and_a_middle_one_the_next_context():
    task = _build([False, True, False, True, False])
    # history: the greeting, then U1 A1 (A1 not kept), before checkpoint 1's query U2
    assert _contents(task.history) == ["Welcome.", "U1", "A1 hello"]
    assert [(c.index, c.query, c.reply) for c in task.checkpoints] == [(1, "U2", "A2 answer"), (2, "U4", "A4 answer")]
    assert task.checkpoints[0].context is None  # checkpoint 1 never has a context
    assert _contents(task.checkpoints[1].context) == ["U3", "A3 one moment"]
    assert [c.name for c in task.checkpoints[0].tool_calls] == ["Lookup"]
    # U5 A5 come after the last checkpoint: not in the task
    assert "U5" not in json.dumps(task.model_dump(mode="json"))
    # turns the task holds: G + 2 * 4 pairs up to A4 = 9 (the dialogue has 11); checkpoints: 2
    assert (task.stats.turns, task.stats.checkpoints) == (9, 2)
    _no_two_users_in_a_row(task)


def test_a_tool_call_in_an_unselected_turn_stays_in_the_context_as_openai_messages():
    task = _build([True, False, False, True, False])
    context = task.checkpoints[1].context
    assert [m["role"] for m in context] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert context[1]["tool_calls"][0]["function"]["name"] == "Lookup"
    assert context[2] == {"role": "tool", "tool_call_id": "c-Lookup", "content": '{"ok": true}'}
    _no_two_users_in_a_row(task)


def test_trailing_unselected_turns_are_dropped():
    task = _build([True, False, False, False, False])
    assert [c.query for c in task.checkpoints] == ["U1"]
    assert task.stats.turns == 3  # G U1 A1
    assert _contents(task.history) == ["Welcome."]


def test_a_selection_that_keeps_nothing_keeps_the_last_agent_turn():
    task = _build([False] * 5)
    assert [(c.index, c.query) for c in task.checkpoints] == [(1, "U5")]
    # greeting 1 + U1 A1 2 + U2 and A2 as call, result, text 4 + U3 A3 2 + U4 A4 2 = 11 messages
    assert _contents(task.history)[-2:] == ["U4", "A4 answer"] and len(task.history) == 11
    _no_two_users_in_a_row(task)


def test_all_mode_writes_no_context_key_and_the_old_stats(pipeline_config):
    rules = RuleAnnotator.from_config(pipeline_config.annotate)
    by_annotator = build_task(task_id="T-1", category=None, channel=None, language="en", dialogue=_dialogue(),
                              knowledge=[], tools=[], cassette=None, annotator=rules)
    by_selector = build_task(task_id="T-1", category=None, channel=None, language="en", dialogue=_dialogue(),
                             knowledge=[], tools=[], cassette=None, selector=AllSelector(rules))
    dumped = by_annotator.model_dump(mode="json")
    assert dumped == by_selector.model_dump(mode="json")
    assert all("context" not in c for c in dumped["checkpoints"]) and len(dumped["checkpoints"]) == 5
    assert dumped["stats"]["turns"] == 1 + 2 * 5


def test_assemble_refuses_a_selection_of_the_wrong_length():
    with pytest.raises(ValueError, match="selection covers 2 turns"):
        assemble(_dialogue(), Selection(("Solution",) * 2, (True, True)))


def test_older_tasks_without_context_still_load():
    line = (REPO / "tickets/tasks.jsonl").read_text(encoding="utf-8").splitlines()[0]
    task = Task.model_validate_json(line)
    assert all(c.context is None for c in task.checkpoints)
    assert json.loads(line) == task.model_dump(mode="json")  # and round-trip to the same keys


# --- the LLM selector ---------------------------------------------------------

ITEMS = [ReplyToLabel("hi", "Hello, how can I help?"),
         ReplyToLabel("my SMS fail", "Could you share the template code?"),
         ReplyToLabel("SMS_1", "One moment."),
         ReplyToLabel("ok", "I have resubmitted the template.", ("SubmitTemplate",))]
GOOD = '{"checkpoints": [{"turn": 2, "type": "Inquire"}, {"turn": 4, "type": "Solution"}]}'


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("CIRRUS_TEST_KEY", "sk-test-not-a-real-key-0000000000")


def _llm(server: FakeOpenAI, pipeline_config) -> LLMSelector:
    return LLMSelector(Endpoint("sel-x", server.base_url, "CIRRUS_TEST_KEY"), fallback=_selector(pipeline_config, "en"))


@pytest.mark.parametrize("raw", [
    GOOD,
    f"```json\n{GOOD}\n```",
    f"Here are the critical turns:\n{GOOD}\nHope this helps.",
    GOOD.replace('"Inquire"', '"inquire"'),
])
def test_parse_selection_accepts_json_fenced_or_with_prose(raw):
    assert parse_selection(raw, 4) == {2: "Inquire", 4: "Solution"}


@pytest.mark.parametrize("raw", [
    "turns 2 and 4",
    '{"checkpoints": [{"turn": 5, "type": "Solution"}]}',  # out of range
    '{"checkpoints": [{"turn": 0, "type": "Solution"}]}',
    '{"checkpoints": [{"turn": 2, "type": "Inquire"}, {"turn": 2, "type": "Solution"}]}',  # twice
    '{"checkpoints": [{"turn": "2", "type": "Inquire"}]}',  # a string, not a number
    '{"checkpoints": [{"turn": 2, "type": "Answer"}]}',  # unknown type
    '{"picked": [2, 4]}',
])
def test_parse_selection_rejects_malformed(raw):
    with pytest.raises(MalformedSelection):
        parse_selection(raw, 4)


def test_llm_selector_selects_and_labels_in_one_call(pipeline_config):
    with FakeOpenAI([f"```json\n{GOOD}\n```"]) as server:
        selection = _llm(server, pipeline_config).select(ITEMS)
    assert selection.keep == (False, True, False, True)
    assert selection.labels[1] == "Inquire" and selection.labels[3] == "Solution"
    assert len(server.requests) == 1
    prompt = server.requests[0]["messages"][1]["content"]
    assert "### Turn 4" in prompt and "Tools called: SubmitTemplate" in prompt and "### Turn 5" not in prompt


def test_llm_selector_retries_invalid_numbers_and_errors_then_succeeds(pipeline_config):
    script = [500, '{"checkpoints": [{"turn": 9, "type": "Solution"}]}', f"Sure! {GOOD}"]
    with FakeOpenAI(script) as server:
        selector = _llm(server, pipeline_config)
        assert selector.select(ITEMS).keep == (False, True, False, True)
    # the 500 is retried by the client, the out-of-range answer by the selector: 3 requests, no fallback
    assert len(server.requests) == 3 and selector.fallbacks == 0


def test_llm_selector_falls_back_to_the_rules_when_answers_stay_malformed(pipeline_config):
    rules = _selector(pipeline_config, "en")
    with FakeOpenAI(["no", "{}", '{"checkpoints": [{"turn": 7, "type": "Solution"}]}']) as server:
        selector = _llm(server, pipeline_config)
        selection = selector.select(ITEMS)
    assert selection == rules.select(ITEMS) and selector.fallbacks == 1
    assert selection.keep == (False, True, False, True)  # the rules: greeting and hold dropped


@pytest.mark.parametrize("status", [400, 422])
def test_a_refused_request_falls_back_for_that_ticket_only(pipeline_config, status):
    with FakeOpenAI([status, GOOD]) as server:
        selector = _llm(server, pipeline_config)
        assert selector.select(ITEMS) == _selector(pipeline_config, "en").select(ITEMS)
        assert selector.select(ITEMS).keep == (False, True, False, True)
    assert len(server.requests) == 2 and selector.fallbacks == 1


def test_a_refused_key_stops_selection(pipeline_config):
    with FakeOpenAI([401]) as server:
        with pytest.raises(ModelAuthError, match="CIRRUS_TEST_KEY"):
            _llm(server, pipeline_config).select(ITEMS)


# --- ingest end to end ---------------------------------------------------------


def _ingest(raw: Path, workspace: Path, pipeline_config, mode: str, endpoint: Endpoint | None = None, **kw) -> dict:
    from cirrus.ingest.pipeline import AnnotatorSpec
    from cirrus.ingest.run import IngestOptions, run_ingest

    return run_ingest(IngestOptions(raw_path=raw, workspace=workspace, pipeline=pipeline_config, progress=False,
                                    annotator=AnnotatorSpec(endpoint, mode), **kw)).manifest  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def selected_sample(tmp_path_factory) -> Path:
    workspace = tmp_path_factory.mktemp("select") / "ws"
    _ingest(SAMPLE_RAW, workspace, load_pipeline(), "select", kb_dir=SAMPLE_KB, jobs=1)
    return workspace


def test_select_ingest_of_the_sample(selected_sample):
    manifest = json.loads((selected_sample / "tickets/manifest.json").read_text())
    committed = json.loads((REPO / "tickets/manifest.json").read_text())
    selection = manifest["checkpoint_selection"]
    assert selection["mode"] == "select" and selection["selector"] == "rules"
    assert selection["total"] == committed["counts"]["checkpoints"]  # what `all` keeps
    assert selection["kept"] == manifest["counts"]["checkpoints"] < selection["total"]
    assert selection["ratio"] == round(selection["kept"] / selection["total"], 4)
    assert selection["config"]["rules_hash"] == load_pipeline().select_hash() and selection["fallbacks"] == 0
    assert manifest["config_hash"] != committed["config_hash"]  # the mode is part of what makes the dataset
    assert "checkpoint_selection" not in committed
    all_tasks = {t["task_id"]: t for t in map(json.loads, (REPO / "tickets/tasks.jsonl").read_text().splitlines())}
    lines = (selected_sample / "tickets/tasks.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(all_tasks)
    for line in lines:
        task = Task.model_validate_json(line)
        assert 1 <= task.stats.checkpoints == len(task.checkpoints) <= len(all_tasks[task.task_id]["checkpoints"])
        assert [c.index for c in task.checkpoints] == list(range(1, len(task.checkpoints) + 1))
        _no_two_users_in_a_row(task)
        # the kept references are a subsequence of the ones `all` writes
        references = iter(c["reply"] for c in all_tasks[task.task_id]["checkpoints"])
        assert all(any(c.reply == r for r in references) for c in task.checkpoints)


def test_ingest_with_the_llm_selector(tmp_path, pipeline_config):
    raw = tmp_path / "t.jsonl"
    raw.write_text(json.dumps({"ticket_id": "A-1", "events": [
        {"role": "customer", "text": "My mailbox sales@example.com is full"},
        {"role": "agent", "text": "Which plan are you on?"},
        {"role": "customer", "text": "the basic one"},
        {"role": "agent", "text": "Thanks, noted, give me a moment."},
        {"role": "customer", "text": "it is the sales team mailbox"},
        {"role": "agent", "text": "I doubled its quota to 10 GB."}]}) + "\n")
    answer = '{"checkpoints": [{"turn": 1, "type": "Inquire"}, {"turn": 3, "type": "Solution"}]}'
    with FakeOpenAI([answer]) as server:
        manifest = _ingest(raw, tmp_path / "ws", pipeline_config, "select",
                           Endpoint("annot", server.base_url, "CIRRUS_TEST_KEY"))
    task = json.loads((tmp_path / "ws/tickets/tasks.jsonl").read_text())
    assert len(server.requests) == 1  # one call selects and labels
    assert [(c["reply_type"], "context" in c) for c in task["checkpoints"]] == [("Inquire", False), ("Solution", True)]
    assert [m["role"] for m in task["checkpoints"][1]["context"]] == ["user", "assistant"]
    selection = manifest["checkpoint_selection"]
    assert (selection["selector"], selection["kept"], selection["total"], selection["fallbacks"]) == ("llm:annot", 2,
                                                                                                      3, 0)


def test_cli_checkpoints_option(tmp_path):
    from typer.testing import CliRunner

    from cirrus.cli import app

    runner = CliRunner()
    assert "--checkpoints" in runner.invoke(app, ["ingest", "--help"]).output
    raw = tmp_path / "t.jsonl"
    raw.write_text("{}\n")
    result = runner.invoke(app, ["ingest", str(raw), "--checkpoints", "some", "-w", str(tmp_path / "ws")])
    assert result.exit_code == 2 and "choose all or select" in result.output


def test_cli_select_prints_the_kept_share(tmp_path):
    from typer.testing import CliRunner

    from cirrus.cli import app

    raw = tmp_path / "t.jsonl"
    raw.write_text(json.dumps({"ticket_id": "A-1", "events": [
        {"role": "customer", "text": "My mailbox is full"},
        {"role": "agent", "text": "Which mailbox is it?"},
        {"role": "customer", "text": "the sales one"},
        {"role": "agent", "text": "I doubled its quota to 10 GB."},
        {"role": "customer", "text": "thanks a lot for the quick fix"},
        {"role": "agent", "text": "You're welcome, Ja***. Have a great day!"}]}) + "\n")
    result = CliRunner().invoke(app, ["ingest", str(raw), "-w", str(tmp_path / "ws"), "-q", "-j", "1",
                                      "--checkpoints", "select"])
    assert result.exit_code == 0, result.output
    # 3 agent turns, the closing dropped: 2 of 3 = 67%
    assert "checkpoints: kept 2 of 3 (67%)" in " ".join(result.output.split())
    task = json.loads((tmp_path / "ws/tickets/tasks.jsonl").read_text())
    assert [c["query"] for c in task["checkpoints"]] == ["My mailbox is full", "the sales one"]
    assert task["stats"] == {**task["stats"], "turns": 4, "checkpoints": 2}


# --- the walk over contexts -------------------------------------------------------


def _walk_task() -> dict:
    def user(text: str) -> dict:
        return {"role": "user", "content": text}

    def bot(text: str) -> dict:
        return {"role": "assistant", "content": text}

    checkpoints = [
        {"index": 1, "query": "Q1", "reply": "R1", "tool_calls": [], "reply_type": "Solution"},
        {"index": 2, "query": "Q2", "reply": "R2", "tool_calls": [], "reply_type": "Solution",
         "context": [user("C2u"), bot("C2a")]},
        {"index": 3, "query": "Q3", "reply": "R3", "tool_calls": [], "reply_type": "Solution",
         "context": [user("C3u"), bot("C3a")]},
        {"index": 4, "query": "Q4", "reply": "R4", "tool_calls": [], "reply_type": "Solution",
         "context": [user("C4u"), bot("C4a")]},
    ]
    return {"task_id": "W-1", "history": [user("H0"), bot("H0a")], "checkpoints": checkpoints, "cassette": None,
            "stats": {"input_tokens": 0, "turns": 16, "checkpoints": 4}}


class RecordingAgent:
    name = "recording"
    offline = True

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.seen: list[list[str]] = []

    async def respond(self, request, replayer):
        self.seen.append([m["content"] for m in request.history] + [request.query])
        text = self.replies[len(self.seen) - 1]
        return EvalTurn(text=text, tool_calls=[], messages=[{"role": "assistant", "content": text}], output_tokens=1)


class ExactJudge:
    name = "exact"

    def __init__(self) -> None:
        self.histories: list[list[str]] = []

    async def covers(self, history, query, reference, candidate):
        self.histories.append([m["content"] for m in history])
        return Verdict(reference in candidate, "exact")


class RecordingFluency:
    name = "fluency"

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    async def follows(self, history, next_query):
        self.asked.append([m["content"] for m in history] + [next_query])
        return Verdict(True, "yes")


def test_the_agent_sees_each_context_before_its_checkpoint_and_a_jump_skips_the_covered_ones():
    # turn 1 answers Q1 and also covers checkpoint 2 (a jump); turn 2 answers Q3 (checkpoint 3), turn 3 Q4
    agent = RecordingAgent(["R1 R2", "R3", "R4"])
    judge, fluency = ExactJudge(), RecordingFluency()
    result = asyncio.run(walk(_walk_task(), agent, judge, fluency, ToolReplayer(None)))
    assert (result.outcome.covered, result.outcome.accepted_turns) == (4, 3)
    assert agent.seen == [
        ["H0", "H0a", "Q1"],  # checkpoint 1: no context
        ["H0", "H0a", "Q1", "R1 R2", "C3u", "C3a", "Q3"],  # checkpoint 2 was covered: its context C2 skipped
        ["H0", "H0a", "Q1", "R1 R2", "C3u", "C3a", "Q3", "R3", "C4u", "C4a", "Q4"],
    ]
    # the fluency check asks whether the next query follows the history plus that checkpoint's context
    assert fluency.asked == [agent.seen[1], agent.seen[2]]
    # the judge saw the same history as the agent, the query last
    assert judge.histories[0] == agent.seen[0] and agent.seen[2] in judge.histories


def test_a_walk_over_tasks_without_context_is_unchanged():
    task = _walk_task()
    for checkpoint in task["checkpoints"]:
        checkpoint.pop("context", None)
    agent = RecordingAgent(["R1", "R2", "R3", "R4"])
    asyncio.run(walk(task, agent, ExactJudge(), RecordingFluency(), ToolReplayer(None)))
    assert agent.seen[-1] == ["H0", "H0a", "Q1", "R1", "Q2", "R2", "Q3", "R3", "Q4"]


def test_rescore_replays_a_walk_over_contexts():
    """``cirrus rescore`` rebuilds what the agent saw from the saved
    transcript: with contexts, the replayed walk must meet the same inputs."""
    from cirrus.evaluate.rescore import FluencyGate, ReplayAgent, SavedAttempt

    task = _walk_task()
    agent = RecordingAgent(["R1 R2", "R3", "R4"])
    first = asyncio.run(walk(task, agent, ExactJudge(), RecordingFluency(), ToolReplayer(None)))
    transcript = {"turns": [{"checkpoint": t.checkpoint, "query": task["checkpoints"][t.checkpoint - 1]["query"],
                             "agent_text": t.turn.text, "agent_messages": t.turn.messages, "tool_calls": [],
                             "verdicts": t.verdicts} for t in first.turns]}
    saved = SavedAttempt.build(task, 0, {"status": "ok", "turns": [{"stl": 1}] * 3}, transcript)
    assert [[m["content"] for m in t.history[-2:]] for t in saved.turns] == [["H0", "H0a"], ["C3u", "C3a"],
                                                                              ["C4u", "C4a"]]
    gate = FluencyGate(saved, None, "source")
    again = asyncio.run(walk(task, ReplayAgent(saved, "replay", True), ExactJudge(), gate, ToolReplayer(None)))
    assert gate.truncated is None  # every fluency question was the saved one, every turn found
    assert (again.outcome.covered, again.outcome.accepted_turns) == (4, 3)


def test_show_prints_the_context_before_a_checkpoint(tmp_path):
    """A context (turns kept between checkpoints, never judged) reaches the
    transcript and `cirrus show` prints it before the checkpoint's query."""
    from typer.testing import CliRunner

    from cirrus.cli import app
    from tests.scripted_models import make_task, write_workspace

    task = make_task("T-ctx", False)
    task["checkpoints"][1]["context"] = [{"role": "user", "content": "one moment, checking"},
                                         {"role": "assistant", "content": "Sure, take your time."}]
    write_workspace(tmp_path, [task])
    runner = CliRunner()
    done = runner.invoke(app, ["eval", "--model", "baseline:oracle", "-w", str(tmp_path), "--run-id", "ctx", "-q"])
    assert done.exit_code == 0, done.output
    transcript = json.loads((tmp_path / "reports/ctx/transcripts.jsonl").read_text().splitlines()[0])
    assert [t.get("context") for t in transcript["turns"]][:2] == [None, task["checkpoints"][1]["context"]]
    shown = runner.invoke(app, ["show", "ctx", "-w", str(tmp_path), "--task", "T-ctx", "--width", "200"])
    assert shown.exit_code == 0, shown.output
    assert "context: customer" in shown.output and "one moment, checking" in shown.output
    assert shown.output.index("Sure, take your time.") < shown.output.index("customer question 2")


def test_a_pattern_that_is_no_regex_is_refused_naming_it():
    """The pipeline file's regular expressions (recognizers, selector rules)
    are checked when it is read, with the bad pattern and the reason."""
    from pydantic import ValidationError

    from cirrus.config import PatternRecognizerConfig, SelectConfig

    with pytest.raises(ValidationError, match=r"invalid regex '\(abc'"):
        PatternRecognizerConfig(name="x", entity="ID", patterns=["ok", "(abc"])
    with pytest.raises(ValidationError, match=r"(?s)verify_patterns.*invalid regex '\['"):
        SelectConfig(verify_patterns=["["])
    assert SelectConfig(filler_patterns=[r"^thanks\b"]).filler_patterns == [r"^thanks\b"]
