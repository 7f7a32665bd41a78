"""What a run will cost, before it starts (``cirrus eval --estimate``).

Counted, not guessed, where the workspace says it: the agent's system
message with the task's knowledge, the tool schemas, the history, each query
and each reference reply are tokenized with Cirrus's offline tokenizer
(tiktoken ``cl100k_base``), and the judges' messages are rendered with their
own prompts.  Assumed where nothing can say it (the assumptions are listed in
:data:`ASSUMPTIONS` and printed with every estimate):

* the walk goes to the end: every checkpoint answered in a turn of its own,
  every turn accepted (the most a walk can cost; a real walk stops at its
  first rejected turn, so a real run costs less);
* the agent's reply is as long as the reference reply; a checkpoint whose
  reference made tool calls costs the agent two model calls (one calling the
  tools, one answering), the second seeing the tool calls and their recorded
  results (read from the cassettes, :class:`CassetteTurns`);
* the judge asks one coverage question per turn and one more about the next
  checkpoint (a logical jump) while one is left; the fluency checker one
  question per turn but the last; each answers in :data:`JUDGE_OUTPUT_TOKENS`
  / :data:`FLUENCY_OUTPUT_TOKENS` tokens;
* provider prompt caches and Cirrus's own cache are not counted on (a resumed
  or repeated run costs less).

Token counts are those of the offline tokenizer, not the provider's: expect
some percent of difference, more for Chinese text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cirrus.agents.prompts import message_tokens
from cirrus.pricing import Price
from cirrus.schema import Task, as_task, task_dict

JUDGE_OUTPUT_TOKENS = 80
FLUENCY_OUTPUT_TOKENS = 40
ASSUMPTIONS = (
    "every checkpoint answered in its own turn and accepted (an upper bound: real walks stop at the first rejection)",
    "the agent's reply is as long as the reference reply; a checkpoint with reference tool calls takes two agent "
    "calls",
    f"the judge answers in {JUDGE_OUTPUT_TOKENS} tokens, the fluency checker in {FLUENCY_OUTPUT_TOKENS}; one jump "
    "question per turn while a later checkpoint is left",
    "no prompt-cache or Cirrus-cache savings; offline tokenizer counts (cl100k_base)",
)

Messages = list[dict[str, Any]]
# (history before the query, query, reference, candidate) -> the judge's system + user text
CoverageRender = Callable[[Sequence[Mapping[str, Any]], str, str, str], str]
# (history, next query) -> the fluency checker's system + user text
FluencyRender = Callable[[Sequence[Mapping[str, Any]], str], str]
# (task as the agent is given it: the dict of its line, schema.task_dict) -> the agent's system message
SystemRender = Callable[[Mapping[str, Any]], str]
# (task as the agent is given it) -> the tool schemas the agent is sent
ToolsOffered = Callable[[Mapping[str, Any]], Sequence[Mapping[str, Any]]]
# (task, checkpoint index 0-based) -> the reference messages of that checkpoint's turn
ReferenceTurn = Callable[[Task, int], Messages]


class LineCounter:
    """A token counter that counts each distinct line once: a judge question
    repeats the history lines of the questions before it, so an estimate
    tokenizes each distinct line once instead of re-tokenizing whole prompts
    (measured on the 84 tau-bench tasks: 1.0 s -> 0.4 s for the estimate).
    A text's count is the sum of its lines' counts plus one per line break;
    it comes out a few percent above counting texts whole (4% for the judge
    there), since a tokenizer merges some characters across line breaks."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self._count = count
        self._lines: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        total = 0
        lines = text.split("\n")
        for line in lines:
            if not line:
                continue
            known = self._lines.get(line)
            if known is None:
                known = self._lines[line] = self._count(line)
            total += known
        return total + len(lines) - 1


@dataclass(slots=True)
class RoleEstimate:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None

    def add(self, calls: int, input_tokens: int, output_tokens: int) -> None:
        self.calls += calls
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens


@dataclass(slots=True)
class Estimate:
    tasks: int
    attempts: int
    checkpoints: int
    roles: dict[str, RoleEstimate] = field(default_factory=dict)
    currency: str | None = None
    total_cost: float | None = None
    assumptions: tuple[str, ...] = ASSUMPTIONS
    notes: tuple[str, ...] = ()  # what this estimate leaves out (an agent whose own calls Cirrus cannot see)

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "attempts_per_task": self.attempts, "checkpoints": self.checkpoints,
                "roles": {name: {"calls": r.calls, "input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
                                 "cost": r.cost} for name, r in self.roles.items()},
                "total_cost": self.total_cost, "currency": self.currency, "assumptions": list(self.assumptions),
                **({"notes": list(self.notes)} if self.notes else {})}


def reference_turn(task: Task, index: int) -> Messages:
    """The reference agent turn of checkpoint ``index`` as chat messages,
    without tool results (what an estimate without the cassette can see):
    the reference's tool calls, then its reply."""
    checkpoint = task.checkpoints[index]
    messages: Messages = []
    if checkpoint.tool_calls:
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"ref-{index}-{n}", "type": "function",
             "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)}}
            for n, call in enumerate(checkpoint.tool_calls)]})
    if checkpoint.reply:
        messages.append({"role": "assistant", "content": checkpoint.reply})
    return messages


class CassetteTurns:
    """``estimate``'s ``reference`` for a workspace: reference turns with
    their tool results replayed from the task's cassette (what the agent's
    second call of such a turn sees), as a subtask run builds them
    (:func:`cirrus.evaluate.subtask.reference_turn`).  Called in dialogue
    order, task by task; :meth:`close` closes the last cassette."""

    def __init__(self, workspace: Any) -> None:
        self.workspace = workspace
        self._task_id: str | None = None
        self._replayer: Any = None
        self.unreadable = 0  # tasks whose cassette could not be read: their turns counted without tool results

    def __call__(self, task: Task, index: int) -> Messages:
        from cirrus.evaluate.subtask import consume_calls, reference_turn as turn_of
        from cirrus.replay import ToolReplayer

        if task.task_id != self._task_id:
            self.close()
            self._task_id = task.task_id
            try:
                self._replayer = ToolReplayer.for_task(self.workspace, task)
            except Exception:  # noqa: BLE001  (an unreadable cassette: counted without its results)
                self.unreadable += 1
            else:
                consume_calls(task.history, self._replayer)
        if self._replayer is None:
            return reference_turn(task, index)
        checkpoint = task.checkpoints[index]
        consume_calls(checkpoint.context or [], self._replayer)
        return turn_of(checkpoint, index + 1, self._replayer)

    def close(self) -> None:
        if self._replayer is not None:
            self._replayer.close()
        self._replayer = None


def task_usage(task: Task | Mapping[str, Any], count: Callable[[str], int], *, system: SystemRender,
               coverage: CoverageRender | None, fluency: FluencyRender | None,
               reference: ReferenceTurn = reference_turn, jumps: bool = True,
               tools_offered: ToolsOffered | None = None) -> dict[str, RoleEstimate]:
    """One attempt's estimated calls and tokens per role (see the module's
    assumptions); ``coverage`` / ``fluency`` ``None``: an offline role, no
    calls; ``jumps=False``: no logical-jump question (a subtask run).
    ``task``: a :class:`~cirrus.schema.Task` (a mapping is validated into
    one); ``system`` and ``tools_offered`` are given it as the agent is
    (:func:`~cirrus.schema.task_dict`)."""
    task = as_task(task)
    seen_by_agent = task_dict(task)
    checkpoints = task.checkpoints
    total = len(checkpoints)
    roles = {"agent": RoleEstimate()}
    if coverage is not None:
        roles["judge"] = RoleEstimate()
    if fluency is not None:
        roles["fluency"] = RoleEstimate()
    tools = list(tools_offered(seen_by_agent)) if tools_offered is not None else task.tools
    fixed = count(system(seen_by_agent)) + (count(json.dumps(tools, ensure_ascii=False)) if tools else 0)
    history: Messages = list(task.history)
    history_tokens = sum(message_tokens(m, count) for m in history)
    for index, checkpoint in enumerate(checkpoints):
        context = list(checkpoint.context or [])
        history += context
        history_tokens += sum(message_tokens(m, count) for m in context)
        query = {"role": "user", "content": checkpoint.query}
        query_tokens = message_tokens(query, count)
        turn = reference(task, index)
        turn_tokens = [message_tokens(m, count) for m in turn]
        prompt = fixed + history_tokens + query_tokens
        reply = checkpoint.reply
        reply_tokens = count(reply) if reply else 0
        if checkpoint.tool_calls:
            # first call writes the tool calls; the second sees them and their results and writes the reply
            before_reply = sum(turn_tokens) - reply_tokens
            call_tokens = turn_tokens[0] if turn_tokens else 0
            roles["agent"].add(2, 2 * prompt + before_reply, call_tokens + reply_tokens)
        else:
            roles["agent"].add(1, prompt, reply_tokens)
        seen = history + [query]
        if coverage is not None and reply.strip():
            roles["judge"].add(1, count(coverage(seen, checkpoint.query, reply, reply)), JUDGE_OUTPUT_TOKENS)
        history = seen + turn
        history_tokens += query_tokens + sum(turn_tokens)
        if index + 1 < total:
            later = checkpoints[index + 1]
            if jumps and coverage is not None and later.reply.strip():
                roles["judge"].add(1, count(coverage(seen, later.query, later.reply, reply)), JUDGE_OUTPUT_TOKENS)
            if fluency is not None:
                following = history + list(later.context or [])
                roles["fluency"].add(1, count(fluency(following, later.query)), FLUENCY_OUTPUT_TOKENS)
    return roles


def estimate(tasks: Iterable[Task | Mapping[str, Any]], attempts: int, count: Callable[[str], int], *,
             system: SystemRender, coverage: CoverageRender | None, fluency: FluencyRender | None,
             models: Mapping[str, str], prices: Mapping[str, Price],
             reference: ReferenceTurn = reference_turn, jumps: bool = True,
             tools_offered: ToolsOffered | None = None, notes: Sequence[str] = ()) -> Estimate:
    """The estimate of a run of ``attempts`` attempts per task.  ``models``
    names the model of every model client (``agent``, ``judge`` or a panel's
    ``judge[1]``, ``judge[2]``, ..., ``fluency``); a role without a client
    is offline and makes no calls (an offline agent: a baseline).  Every
    member of a judge panel is asked every question the judge is.
    ``tasks``: :class:`~cirrus.schema.Task`s (a mapping is validated into one)."""
    per_role = {"agent": RoleEstimate(), "judge": RoleEstimate(), "fluency": RoleEstimate()}
    n_tasks = checkpoints = 0
    for given in tasks:
        task = as_task(given)
        n_tasks += 1
        checkpoints += len(task.checkpoints)
        for role, usage in task_usage(task, count, system=system, coverage=coverage, fluency=fluency,
                                      reference=reference, jumps=jumps, tools_offered=tools_offered).items():
            per_role[role].add(usage.calls, usage.input_tokens, usage.output_tokens)
    result = Estimate(n_tasks, attempts, checkpoints, notes=tuple(notes))
    currencies: set[str] = set()
    unpriced: set[str] = set()
    costs: list[float] = []
    for role, usage in per_role.items():
        clients = sorted(name for name in models if name.split("[", 1)[0] == role)
        if not clients:
            continue
        estimate_ = RoleEstimate()
        role_costs: list[float] = []
        for client in clients:
            calls, tokens_in, tokens_out = usage.calls * attempts, usage.input_tokens * attempts, \
                usage.output_tokens * attempts
            estimate_.add(calls, tokens_in, tokens_out)
            price = prices.get(models[client])
            if price is None:
                unpriced.add(role)
            else:
                currencies.add(price.currency)
                role_costs.append(price.cost(tokens_in, tokens_out))
        if role not in unpriced:
            estimate_.cost = sum(role_costs)
            costs.append(estimate_.cost)
        result.roles[role] = estimate_
    if len(currencies) == 1:
        result.currency = currencies.pop()
    if costs and len(currencies) <= 1:
        result.total_cost = sum(costs)
    return result


def renderers(roles: Any) -> dict[str, Any]:
    """``estimate``'s ``system``, ``coverage``, ``fluency`` and ``models`` for
    the roles of a run (:class:`cirrus.evaluate.roles.Roles`): the prompts
    its model-backed agent, judge and fluency checker will send; ``None``
    for an offline judge or checker."""
    from cirrus.agents import prompts
    from cirrus.judges.llm import LLMCoverageJudge, LLMFluencyChecker

    agent_prompt = getattr(roles.agent, "system_prompt", prompts.SYSTEM_PROMPT)
    judges = [j for j in getattr(roles.judge, "members", (roles.judge,)) if isinstance(j, LLMCoverageJudge)]
    coverage: CoverageRender | None = None
    if judges:
        judge = judges[0]

        def coverage(history: Sequence[Mapping[str, Any]], query: str, reference_: str, candidate: str) -> str:
            return judge.system_prompt + "\n" + judge.user_message(history, query, reference_, candidate)
    fluency: FluencyRender | None = None
    if isinstance(roles.fluency, LLMFluencyChecker):
        checker = roles.fluency

        def fluency(history: Sequence[Mapping[str, Any]], next_query: str) -> str:
            return checker.system_prompt + "\n" + checker.user_message(history, next_query)
    system: SystemRender = getattr(roles.agent, "system_text", None) or \
        (lambda task: prompts.system_message(task, agent_prompt))
    notes: list[str] = []
    if "agent" not in roles.clients and not getattr(roles.agent, "offline", False):
        notes.append(f"the agent under test ({getattr(roles.agent, 'name', 'your agent')}) calls its models itself: "
                     "its calls, tokens and cost are not in this estimate")
    return {"system": system, "tools_offered": getattr(roles.agent, "offered_tools", None), "coverage": coverage,
            "fluency": fluency, "models": {name: client.model for name, client in roles.clients.items()},
            "notes": notes}


def estimate_run(roles: Any, tasks: Iterable[Task | Mapping[str, Any]], workspace: Any, attempts: int,
                 prices: Mapping[str, Price], mode: str) -> Estimate:
    """The estimate of a run as configured: ``roles`` (:class:`cirrus.evaluate.roles.Roles`)
    asking about ``tasks`` of ``workspace`` ``attempts`` times each, counted
    with :func:`cirrus.offline.count_tokens` over the reference turns with
    their replayed tool results (:class:`CassetteTurns`); ``mode`` "subtask"
    asks one question per subtask, with no logical-jump or fluency question."""
    from cirrus.offline import count_tokens

    parts = renderers(roles)
    if mode == "subtask":  # one question per subtask, no jump or fluency question
        parts["fluency"] = None
    turns = CassetteTurns(workspace)
    try:
        return estimate(tasks, attempts, LineCounter(count_tokens), jumps=mode != "subtask", **parts,
                        prices=prices, reference=turns)
    finally:
        turns.close()
