"""Why a checkpoint failed: one category per failed agent turn (docs/failures.md).

A turn *fails* when the walk ends on it: the judge rejected it for the
checkpoint it answered, or it was accepted but the next real customer message
could no longer follow it (fluency No).  :func:`classify` names the reason
with one of :data:`FAILURE_CATEGORIES`, from what the run stores about the
turn (:class:`TurnFacts`): TIA / TSA / TEV / RR, whether the turn's tool calls
were answered from the cassette, the fluency verdict, the coverage judge's
``problem`` (``missing`` / ``contradiction``, :mod:`cirrus.judges.verdicts`),
the reference's reply type and the reply type of the agent's own text (the
ingest's :class:`~cirrus.ingest.annotate.rules.RuleAnnotator`).

:func:`classify` is pure; :func:`turn_facts` / :func:`failure_of` build the
facts of a judged turn of the walk (``attempt_row`` of the runner, so ``cirrus
eval`` and ``cirrus rescore`` classify alike), and :func:`transcript_facts`
the facts of a turn as ``transcripts.jsonl`` and ``attempts.jsonl`` hold it,
so a finished run can be classified again without any model.

Precedence (the order of :data:`FAILURE_CATEGORIES`): tool failures first,
as they are facts the walk measured, not opinions, and a reply built without
the right tool result cannot be judged on its own; then the agent answering
when the reference asks (a mistake of conversation strategy, which the
judge's verdict only echoes); then what the judge says (a contradiction
before the default, missing information); last, the fluency stop of an
accepted turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cirrus.evaluate.walk import JudgedTurn
    from cirrus.schema import Task

MISSED_TOOL_CALL = "missed_tool_call"
WRONG_TOOL = "wrong_tool"
UNRECORDED_CALL = "unrecorded_call"
WRONG_ARGUMENTS = "wrong_arguments"
PREMATURE_SOLUTION = "premature_solution"
CONTRADICTION = "contradiction"
MISSING_INFORMATION = "missing_information"
NOT_FOLLOWABLE = "not_followable"

# name -> one line; the order is the precedence (the first that applies wins)
FAILURE_CATEGORIES: tuple[tuple[str, str], ...] = (
    (MISSED_TOOL_CALL, "The reference called tools at this checkpoint; the turn called none (TIA false)."),
    (WRONG_TOOL, "The turn called tools, but not every tool the reference called (TSA false)."),
    (UNRECORDED_CALL, "The right tools, but a call the recordings do not hold: replay answered "
                      "'no recorded result' (TEV false, a call with recorded = false)."),
    (WRONG_ARGUMENTS, "The right tools, each call answered from the recordings, yet a reference call "
                      "was not made with its arguments (TEV false, every call recorded)."),
    (PREMATURE_SOLUTION, "The reference asks or clarifies (Inquire / Clarify) but the turn gives a "
                         "solution instead (the agent's text labelled Solution by the ingest's rules)."),
    (CONTRADICTION, "The judge says the reply contradicts key information of the reference (RR false)."),
    (MISSING_INFORMATION, "The judge says key information of the reference is missing (RR false; the "
                          "default when the judge names no problem)."),
    (NOT_FOLLOWABLE, "The turn was accepted, but the real customer's next message could no longer "
                     "follow it (fluency false)."),
)
FAILURE_NAMES: tuple[str, ...] = tuple(name for name, _ in FAILURE_CATEGORIES)
FAILURE_DESCRIPTIONS: dict[str, str] = dict(FAILURE_CATEGORIES)

# the judge's ``problem`` values (the coverage judge's JSON field)
PROBLEM_MISSING = "missing"
PROBLEM_CONTRADICTION = "contradiction"
PROBLEMS = (PROBLEM_MISSING, PROBLEM_CONTRADICTION)

ASKING_TYPES = frozenset({"Inquire", "Clarify"})


@dataclass(frozen=True, slots=True)
class TurnFacts:
    """What is stored about one judged agent turn, for :func:`classify`.

    ``tia`` / ``tsa`` / ``tev`` / ``rr`` / ``fluent`` as in
    ``checkpoints.parquet``; ``reference_calls``: the reference's tool calls
    at the checkpoint; ``calls_made``: the turn's; ``unrecorded_calls``: of
    those, the ones replay could not answer (``recorded`` false; ``None``
    when unknown); ``judge_problem``: the coverage judge's ``missing`` /
    ``contradiction`` (``None``: not stated); ``reference_type``: the
    checkpoint's reply type; ``agent_type``: the reply type of the agent's
    text by the ingest's rules (``None`` when not worked out)."""

    accepted: bool
    rr: bool | None = None
    tia: bool | None = None
    tsa: bool | None = None
    tev: bool | None = None
    fluent: bool | None = None
    reference_calls: int = 0
    calls_made: int = 0
    unrecorded_calls: int | None = 0
    judge_problem: str | None = None
    reference_type: str | None = None
    agent_type: str | None = None


def _tool_failure(facts: TurnFacts) -> str | None:
    if facts.reference_calls <= 0:
        return None  # an extra call (TIA false) does not reject a turn
    if facts.calls_made == 0 or facts.tia is False:
        return MISSED_TOOL_CALL
    if facts.tsa is False:
        return WRONG_TOOL
    if facts.tev is False:
        return UNRECORDED_CALL if facts.unrecorded_calls else WRONG_ARGUMENTS
    return None


def needs_agent_type(facts: TurnFacts) -> bool:
    """Whether :func:`classify` could use ``agent_type`` for these facts (so
    callers label the agent's text only then)."""
    return not facts.accepted and facts.reference_type in ASKING_TYPES and _tool_failure(facts) is None


def classify(facts: TurnFacts) -> str | None:
    """The failure category of a turn (one of :data:`FAILURE_NAMES`); ``None``
    for a turn that was accepted and that the next query could follow (or
    none was asked).  The first category that applies, in the order of
    :data:`FAILURE_CATEGORIES`, wins."""
    if facts.accepted:
        return NOT_FOLLOWABLE if facts.fluent is False else None
    tool = _tool_failure(facts)
    if tool is not None:
        return tool
    if facts.reference_type in ASKING_TYPES and facts.agent_type == "Solution":
        return PREMATURE_SOLUTION
    if facts.judge_problem == PROBLEM_CONTRADICTION:
        return CONTRADICTION
    return MISSING_INFORMATION


# --------------------------------------------------------------------------
# the agent's reply type, by the ingest's rules


@lru_cache(maxsize=8)
def _annotator(language: str) -> Any:
    from cirrus.config import load_pipeline
    from cirrus.ingest.annotate.rules import RuleAnnotator

    return RuleAnnotator.from_config(load_pipeline().annotate_for(language or "en"))


def agent_reply_type(text: str, tool_names: Sequence[str] = (), query: str = "", language: str = "en") -> str:
    """The reply type of an agent's turn by the rules ``cirrus ingest`` labels
    references with (the built-in pipeline's rules for ``language``)."""
    from cirrus.ingest.annotate.base import ReplyToLabel

    return str(_annotator(language).label_one(ReplyToLabel(query=query, reply=text or "",
                                                           tool_names=tuple(tool_names))))


def _problem_of(verdicts: Sequence[Mapping[str, Any]], checkpoint: int) -> str | None:
    """The coverage judge's problem for ``checkpoint`` (the turn's own)."""
    for verdict in verdicts:
        if verdict.get("kind") == "coverage" and verdict.get("checkpoint") == checkpoint:
            problem = verdict.get("problem")
            return problem if problem in PROBLEMS else None
    return None


def _with_agent_type(facts: TurnFacts, text: str, tool_names: Sequence[str], query: str,
                     language: str) -> TurnFacts:
    if not needs_agent_type(facts):
        return facts
    from dataclasses import replace

    return replace(facts, agent_type=agent_reply_type(text, tool_names, query, language))


def turn_facts(judged: JudgedTurn, task: Task | Mapping[str, Any]) -> TurnFacts:
    """The facts of one judged turn of :func:`cirrus.evaluate.walk.walk` of
    ``task`` (a :class:`~cirrus.schema.Task`; a mapping is validated into one)."""
    from cirrus.schema import as_task

    task = as_task(task)
    checkpoint = task.checkpoints[judged.checkpoint - 1]
    decision, calls = judged.decision, judged.turn.tool_calls
    facts = TurnFacts(
        accepted=decision.accepted, rr=decision.rr, tia=decision.tia, tsa=decision.tsa, tev=decision.tev,
        fluent=judged.fluent, reference_calls=len(checkpoint.tool_calls), calls_made=len(calls),
        unrecorded_calls=sum(1 for call in calls if not call.recorded),
        judge_problem=_problem_of(judged.verdicts, judged.checkpoint), reference_type=judged.reply_type or None)
    return _with_agent_type(facts, judged.turn.text, [c.name for c in calls], checkpoint.query,
                            task.language or "en")


def failure_of(judged: JudgedTurn, task: Task | Mapping[str, Any]) -> str | None:
    """:func:`classify` of a judged turn of the walk."""
    return classify(turn_facts(judged, task))


def transcript_facts(turn: Mapping[str, Any], stats: Mapping[str, Any], language: str = "en") -> TurnFacts:
    """The facts of a turn of a finished run: ``turn`` as ``transcripts.jsonl``
    holds it, ``stats`` as ``attempts.jsonl``'s row holds it (``tia``,
    ``tsa``, ``tev``, ``rr``; ``reply_type``)."""
    calls = turn.get("tool_calls") or []
    facts = TurnFacts(
        accepted=bool(turn.get("accepted")), rr=stats.get("rr"), tia=stats.get("tia"), tsa=stats.get("tsa"),
        tev=stats.get("tev"), fluent=turn.get("fluent"), reference_calls=len(turn.get("reference_tool_calls") or ()),
        calls_made=len(calls), unrecorded_calls=sum(1 for call in calls if not call.get("recorded")),
        judge_problem=_problem_of(turn.get("verdicts") or [], int(turn.get("checkpoint") or 0)),
        reference_type=stats.get("reply_type") or None)
    return _with_agent_type(facts, str(turn.get("agent_text") or ""), [str(c.get("name", "")) for c in calls],
                            str(turn.get("query") or ""), language)
