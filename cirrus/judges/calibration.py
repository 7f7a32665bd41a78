"""Judge calibration (the library behind ``cirrus judge-eval LABELS.jsonl
[--role fluency]``, :mod:`cirrus.commands.judge_eval`).

Measures a coverage judge against human labels the way the paper does (91.49%
agreement on 141 expert labels), so users can measure their own judge; with
``--role fluency`` it measures the fluency checker the same way.

Input (coverage, the default): a JSONL file, one labelled case a line::

    {"history": [OpenAI chat messages] or "",   # the dialogue before the query (optional)
     "query": "...",                            # the customer's last message
     "reference": "...",                        # the human engineer's reply (non-empty)
     "candidate": "...",                        # the reply being judged
     "label": "Included" | "Not Included",      # the human verdict
     "id": "..."}                               # optional; other keys are ignored

Every row is checked before any judge is called; all problems are reported
as ``FILE:LINE: reason`` (:class:`LabelFileError`).  Labels are read
case-insensitively, ignoring spaces, ``_`` and ``-`` ("not_included" is "Not
Included").

The judge sees a case exactly as it sees a checkpoint in ``cirrus eval``: the
walk passes the history *with the query appended as the last customer
message*, so :func:`judge_history` appends it too (unless the history already
ends with that very customer message).

Metrics (:func:`judge_metrics`, pure): "Included" is the positive class.
Accuracy, precision, recall, F1, Cohen's kappa and the 2x2 confusion matrix;
a 95% Wilson interval for the accuracy.  Undefined values are ``None``, never
NaN: precision when the judge never says Included, recall when no label is
Included, F1 when neither labels nor verdicts hold an Included, kappa when
the expected agreement is 1 (labels and verdicts all of one and the same
class: agreement by chance explains everything, so kappa is 0/0).

Input with ``--role fluency``: one labelled case a line::

    {"history": [OpenAI chat messages],          # the conversation as it stands, the agent's
                                                 # replies in it (non-empty, one assistant message at least)
     "next_query": "...",                        # the real customer's next message (non-empty)
     "label": "Yes" | "No",                      # does it still follow? ("true"/"false", JSON booleans too)
     "id": "..."}                                # optional; other keys are ignored

The checker is asked ``follows(history, next_query)`` exactly as the walk asks
it after an accepted turn.  "Yes" (the message follows) is the positive
class.  A row of one role's file given to the other role is reported with
the role it looks like (:func:`row_role`).

A row whose judge call fails for infrastructure reasons (API errors after
retries, an unreadable verdict after repair attempts) is reported as an error
and left out of the metrics, as in ``cirrus eval``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    from cirrus.evaluate.types import CoverageJudge, FluencyChecker, Verdict

INCLUDED = "Included"
NOT_INCLUDED = "Not Included"
YES = "Yes"
NO = "No"
_LABELS = {"included": True, "notincluded": False}
_FLUENCY_LABELS = {"yes": True, "no": False, "true": True, "false": False}
_ROLES = frozenset({"system", "user", "assistant", "tool", "developer"})
_MAX_SHOWN_ERRORS = 20


# ---------------------------------------------------------------------------
# the labelled file


class CalibratedRole(str, Enum):
    """What ``judge-eval`` measures (``--role``)."""

    coverage = "coverage"
    fluency = "fluency"


@dataclass(frozen=True, slots=True)
class RoleSpec:
    """How one measured role is named in tables and records."""

    role: CalibratedRole
    measured: str  # "judge" / "checker": the column title of its verdicts
    positive: str  # the positive class
    negative: str
    fields: str  # the row's own fields, for error hints

    def class_name(self, value: bool | None) -> str | None:
        return None if value is None else self.positive if value else self.negative


COVERAGE_SPEC = RoleSpec(CalibratedRole.coverage, "judge", INCLUDED, NOT_INCLUDED,
                         "query, reference, candidate, Included/Not Included labels")
FLUENCY_SPEC = RoleSpec(CalibratedRole.fluency, "checker", YES, NO, "history, next_query, Yes/No labels")
SPECS = {spec.role: spec for spec in (COVERAGE_SPEC, FLUENCY_SPEC)}


class LabelFileError(ValueError):
    """The labelled file cannot be used; the message names file, line and reason."""


@dataclass(frozen=True, slots=True)
class LabelledCase:
    """A coverage-judge case."""

    line: int  # 1-based line of the file
    id: str
    history: list[dict[str, Any]]
    query: str
    reference: str
    candidate: str
    label: bool  # True: Included
    spec: ClassVar[RoleSpec] = COVERAGE_SPEC


@dataclass(frozen=True, slots=True)
class FluencyCase:
    """A fluency-checker case: does ``next_query`` still follow ``history``?"""

    line: int  # 1-based line of the file
    id: str
    history: list[dict[str, Any]]
    next_query: str
    label: bool  # True: Yes, the next message follows
    spec: ClassVar[RoleSpec] = FLUENCY_SPEC


Case = LabelledCase | FluencyCase
_C = TypeVar("_C", LabelledCase, FluencyCase)


def parse_label(value: Any) -> bool | None:
    """``True`` for Included, ``False`` for Not Included, ``None`` otherwise."""
    if not isinstance(value, str):
        return None
    return _LABELS.get(re.sub(r"[\s_-]+", "", value.lower()))


def parse_fluency_label(value: Any) -> bool | None:
    """``True`` for Yes (the next message follows), ``False`` for No, ``None``
    otherwise; "true"/"false" and JSON booleans are read too."""
    if isinstance(value, bool):
        return value
    if not isinstance(value, str):
        return None
    return _FLUENCY_LABELS.get(value.strip().lower())


_COVERAGE_FIELDS = ("query", "reference", "candidate")
_FLUENCY_FIELDS = ("next_query",)


def row_role(row: Any) -> CalibratedRole | None:
    """The role whose label row ``row`` looks like by its fields, or None
    when it has the fields of neither or of both (the row checks say then
    what is wrong)."""
    if not isinstance(row, dict):
        return None
    coverage = any(key in row for key in _COVERAGE_FIELDS)
    fluency = any(key in row for key in _FLUENCY_FIELDS)
    if coverage == fluency:
        return None
    return CalibratedRole.coverage if coverage else CalibratedRole.fluency


def _check_history(value: Any) -> tuple[list[dict[str, Any]] | None, str | None]:
    if value is None or value == "":
        return [], None
    if not isinstance(value, list):
        return None, f"history must be a list of chat messages or \"\", not {type(value).__name__}"
    for index, message in enumerate(value):
        if not isinstance(message, dict):
            return None, f"history[{index}] is not a message object"
        role = message.get("role")
        if role not in _ROLES:
            return None, f"history[{index}] has role {role!r}; use one of {', '.join(sorted(_ROLES))}"
        content = message.get("content")
        if content is not None and not isinstance(content, (str, list)):
            return None, f"history[{index}].content must be text"
    return value, None


def _check_row(row: Any) -> str | LabelledCase:
    """A coverage row's problem, or the case (line and id filled in by the caller)."""
    if not isinstance(row, dict):
        return f"a row must be a JSON object, not {type(row).__name__}"
    missing = [key for key in ("query", "reference", "candidate", "label") if key not in row]
    if missing:
        return f"missing {', '.join(missing)}"
    for key in ("query", "reference", "candidate"):
        if not isinstance(row[key], str):
            return f"{key} must be a string, not {type(row[key]).__name__}"
    if not row["reference"].strip():
        return "reference is empty (the judge is never asked about an empty reference)"
    label = parse_label(row["label"])
    if label is None:
        return f"label must be {INCLUDED!r} or {NOT_INCLUDED!r}, not {row['label']!r}"
    history, problem = _check_history(row.get("history"))
    if problem:
        return problem
    if "id" in row and not isinstance(row["id"], (str, int)):
        return "id must be a string or a number"
    return LabelledCase(0, "", history or [], row["query"], row["reference"], row["candidate"], label)


def _check_fluency_row(row: Any) -> str | FluencyCase:
    """A fluency row's problem, or the case (line and id filled in by the caller)."""
    if not isinstance(row, dict):
        return f"a row must be a JSON object, not {type(row).__name__}"
    missing = [key for key in ("history", "next_query", "label") if key not in row]
    if missing:
        return f"missing {', '.join(missing)}"
    if not isinstance(row["next_query"], str):
        return f"next_query must be a string, not {type(row['next_query']).__name__}"
    if not row["next_query"].strip():
        return "next_query is empty (give the customer's real next message)"
    label = parse_fluency_label(row["label"])
    if label is None:
        hint = "; Included/Not Included are coverage labels (--role coverage)" \
            if parse_label(row["label"]) is not None else ""
        return f"label must be {YES!r} or {NO!r}, not {row['label']!r}{hint}"
    if not isinstance(row["history"], list):
        return f"history must be a list of chat messages, not {type(row['history']).__name__}"
    if not row["history"]:
        return "history is empty: give the conversation as it stands, the agent's replies in it"
    history, problem = _check_history(row["history"])
    if problem:
        return problem
    history = history or []
    if not any(m.get("role") == "assistant" and m.get("content") for m in history):
        return "history holds no assistant message with content: the checker judges the agent's replies"
    if "id" in row and not isinstance(row["id"], (str, int)):
        return "id must be a string or a number"
    return FluencyCase(0, "", history, row["next_query"], label)


def _wrong_role(seen: CalibratedRole, wanted: CalibratedRole) -> str:
    flag = "--role coverage (the default)" if seen is CalibratedRole.coverage else f"--role {seen.value}"
    return (f"this is a {seen.value} label row ({SPECS[seen].fields}), not a {wanted.value} one: "
            f"run with {flag}, or give {SPECS[wanted].fields}")


def _load(path: Path, spec: RoleSpec, check: Callable[[Any], str | _C], limit: int | None) -> list[_C]:
    """Read and check every row of ``path`` with ``check``; raise
    :class:`LabelFileError` listing every problem (``path:line: reason``), or
    when the file holds no row."""
    if not path.is_file():
        raise LabelFileError(f"{path} does not exist or is not a file")
    cases: list[_C] = []
    problems: list[str] = []
    ids: dict[str, int] = {}
    rows = 0
    other_role: dict[CalibratedRole, int] = {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            rows += 1
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"{path}:{number}: not valid JSON ({exc.msg} at column {exc.colno})")
                continue
            seen = row_role(row)
            if seen is not None and seen is not spec.role:
                problems.append(f"{path}:{number}: {_wrong_role(seen, spec.role)}")
                other_role[seen] = other_role.get(seen, 0) + 1
                continue
            checked = check(row)
            if isinstance(checked, str):
                problems.append(f"{path}:{number}: {checked}")
                continue
            case_id = str(row.get("id", f"line {number}"))
            if case_id in ids:
                problems.append(f"{path}:{number}: duplicate id {case_id!r} (first at line {ids[case_id]})")
                continue
            ids[case_id] = number
            cases.append(dataclasses.replace(checked, line=number, id=case_id))
    if problems:
        shown = problems[:_MAX_SHOWN_ERRORS]
        more = len(problems) - len(shown)
        message = "\n".join(shown) + (f"\n... and {more} more problems" if more else "")
        for seen, count in other_role.items():
            if count == rows:  # the whole file is of the other role: say so once, last
                message += (f"\n{path} looks like a {seen.value} label file: run "
                            f"cirrus judge-eval --role {seen.value} {path}")
        raise LabelFileError(message)
    if not cases:
        raise LabelFileError(f"{path} holds no labelled row")
    return cases[:limit] if limit is not None else cases


def load_labels(path: Path, limit: int | None = None) -> list[LabelledCase]:
    """The coverage-judge cases of ``path``, every row checked (:func:`_load`)."""
    return _load(path, COVERAGE_SPEC, _check_row, limit)


def load_fluency_labels(path: Path, limit: int | None = None) -> list[FluencyCase]:
    """The fluency-checker cases of ``path``, every row checked (:func:`_load`)."""
    return _load(path, FLUENCY_SPEC, _check_fluency_row, limit)


def judge_history(case: LabelledCase) -> list[dict[str, Any]]:
    """The history the judge is given: as in the walk, the case's history
    with the query appended as the last customer message."""
    history = list(case.history)
    last = history[-1] if history else None
    if not (last and last.get("role") == "user" and last.get("content") == case.query):
        history.append({"role": "user", "content": case.query})
    return history


# ---------------------------------------------------------------------------
# metrics (pure)


@dataclass(frozen=True, slots=True)
class Confusion:
    """2x2 confusion matrix; "Included" (coverage) or "Yes" (fluency) is the positive class."""

    tp: int  # label Included, judge Included
    fp: int  # label Not Included, judge Included
    fn: int  # label Included, judge Not Included
    tn: int  # label Not Included, judge Not Included

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn


def confusion(labels: Sequence[bool], predictions: Sequence[bool]) -> Confusion:
    if len(labels) != len(predictions):
        raise ValueError(f"{len(labels)} labels but {len(predictions)} predictions")
    pairs = list(zip(map(bool, labels), map(bool, predictions)))
    return Confusion(tp=pairs.count((True, True)), fp=pairs.count((False, True)),
                     fn=pairs.count((True, False)), tn=pairs.count((False, False)))


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def accuracy(c: Confusion) -> float | None:
    return _ratio(c.tp + c.tn, c.n)


def precision(c: Confusion) -> float | None:
    """Of the judge's Included verdicts, the share labelled Included (None when it gave none)."""
    return _ratio(c.tp, c.tp + c.fp)


def recall(c: Confusion) -> float | None:
    """Of the rows labelled Included, the share the judge called Included (None when there are none)."""
    return _ratio(c.tp, c.tp + c.fn)


def f1(c: Confusion) -> float | None:
    """``2 TP / (2 TP + FP + FN)``: 0.0 when there are positives but no true
    positive; None when neither labels nor verdicts hold an Included."""
    return _ratio(2 * c.tp, 2 * c.tp + c.fp + c.fn)


def cohen_kappa(c: Confusion) -> float | None:
    """Cohen's kappa ``(p_o - p_e) / (1 - p_e)`` by scikit-learn's
    ``cohen_kappa_score``.  None when ``n = 0`` or ``p_e = 1`` (labels and
    verdicts all one and the same class), never NaN."""
    if c.n == 0:
        return None
    import warnings

    from sklearn.exceptions import UndefinedMetricWarning
    from sklearn.metrics import cohen_kappa_score  # imported here: importing sklearn takes a second or more

    # the four cells as four weighted (label, verdict) pairs: the same as n expanded pairs
    labels, verdicts, weights = [1, 0, 1, 0], [1, 1, 0, 0], [c.tp, c.fp, c.fn, c.tn]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)  # p_e = 1: we answer None
        kappa = float(cohen_kappa_score(labels, verdicts, labels=[0, 1], sample_weight=weights))
    return None if math.isnan(kappa) else kappa


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (95% by default); None for n = 0."""
    if n == 0:
        return None
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True, slots=True)
class JudgeMetrics:
    confusion: Confusion
    accuracy: float | None
    accuracy_ci95: tuple[float, float] | None
    precision: float | None
    recall: float | None
    f1: float | None
    kappa: float | None

    @property
    def n(self) -> int:
        return self.confusion.n

    def as_dict(self) -> dict[str, Any]:
        c = self.confusion
        return {"n": c.n, "accuracy": self.accuracy, "accuracy_ci95": list(self.accuracy_ci95 or []) or None,
                "precision": self.precision, "recall": self.recall, "f1": self.f1, "kappa": self.kappa,
                "confusion": {"tp": c.tp, "fp": c.fp, "fn": c.fn, "tn": c.tn}}


def judge_metrics(labels: Sequence[bool], predictions: Sequence[bool]) -> JudgeMetrics:
    """Every agreement metric of the judge's verdicts against the human labels."""
    c = confusion(labels, predictions)
    return JudgeMetrics(c, accuracy(c), wilson_interval(c.tp + c.tn, c.n), precision(c), recall(c), f1(c),
                        cohen_kappa(c))


# ---------------------------------------------------------------------------
# running a judge over the cases


@dataclass(frozen=True, slots=True)
class CaseResult:
    case: Case
    predicted: bool | None  # None: the judge call failed (see error)
    raw: str | None = None
    error: str | None = None

    @property
    def correct(self) -> bool | None:
        return None if self.predicted is None else self.predicted == self.case.label

    def record(self) -> dict[str, Any]:
        name = self.case.spec.class_name
        return {"line": self.case.line, "id": self.case.id, "label": name(self.case.label),
                "predicted": name(self.predicted), "correct": self.correct, "raw": self.raw, "error": self.error}


async def _run_cases(ask: Callable[[_C], Awaitable[Verdict]], cases: Sequence[_C], concurrency: int,
                     progress: Any) -> list[CaseResult]:
    """``ask`` about every case, at most ``concurrency`` at once, in the order
    of ``cases``; an :class:`InfrastructureError` makes an error row."""
    from cirrus.evaluate.types import InfrastructureError

    semaphore = asyncio.Semaphore(max(1, concurrency))

    async def one(case: _C) -> CaseResult:
        async with semaphore:
            try:
                verdict = await ask(case)
                result = CaseResult(case, bool(verdict.ok), verdict.raw)
            except InfrastructureError as exc:
                result = CaseResult(case, None, None, f"{type(exc).__name__}: {exc}")
        if progress is not None:
            progress()
        return result

    return list(await asyncio.gather(*(one(case) for case in cases)))


def coverage_question(judge: CoverageJudge) -> Callable[[LabelledCase], Awaitable[Verdict]]:
    """What ``judge`` is asked about a coverage case."""
    return lambda case: judge.covers(judge_history(case), case.query, case.reference, case.candidate)


def fluency_question(checker: FluencyChecker) -> Callable[[FluencyCase], Awaitable[Verdict]]:
    """What ``checker`` is asked about a fluency case."""
    return lambda case: checker.follows(list(case.history), case.next_query)


async def run_judge(judge: CoverageJudge, cases: Sequence[LabelledCase], concurrency: int = 8,
                    progress: Any = None) -> list[CaseResult]:
    """Ask ``judge`` about every case, at most ``concurrency`` at once; the
    results are in the order of ``cases``.  ``progress`` is called with no
    argument after each case."""
    return await _run_cases(coverage_question(judge), cases, concurrency, progress)


async def run_fluency(checker: FluencyChecker, cases: Sequence[FluencyCase], concurrency: int = 8,
                      progress: Any = None) -> list[CaseResult]:
    """Ask ``checker`` whether each case's next message follows its history,
    as :func:`run_judge` asks a judge."""
    return await _run_cases(fluency_question(checker), cases, concurrency, progress)


async def batch_rounds(ask: Callable[[_C], Awaitable[Verdict]], cases: Sequence[_C], collector: Any,
                       state_dir: Path, *, notify: Callable[[str], None] | None = None,
                       progress: Callable[[str, Any], None] | None = None) -> int:
    """Send every question ``ask`` makes about ``cases`` through the Batch
    API (:func:`cirrus.llm.batching.run_in_rounds`: a case's question is one
    request, or a few rounds when an unreadable answer is repaired); the
    caller's :func:`run_judge` / :func:`run_fluency` then reads the answers.
    Returns the rounds used."""
    from cirrus.evaluate.types import InfrastructureError
    from cirrus.judges.llm import DEFAULT_PARSE_ATTEMPTS
    from cirrus.llm.batching import Deferred, run_in_rounds

    async def probe(case: _C) -> None:
        try:
            await ask(case)
        except (Deferred, InfrastructureError):
            pass  # waits for the next batch / an error row in the writing pass

    async def dry_pass() -> None:
        await asyncio.gather(*(probe(case) for case in cases))

    return await run_in_rounds(collector, dry_pass, state_dir, max_rounds=DEFAULT_PARSE_ATTEMPTS, notify=notify,
                               progress=progress)


def metrics_of(results: Sequence[CaseResult]) -> JudgeMetrics:
    scored = [r for r in results if r.predicted is not None]
    return judge_metrics([r.case.label for r in scored], [bool(r.predicted) for r in scored])


def write_records(path: Path, results: Sequence[CaseResult]) -> None:
    """One JSON line per case (line, id, label, predicted, correct, raw
    answer, error) at ``path``, its folder made when missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for result in results:
            handle.write(json.dumps(result.record(), ensure_ascii=False) + "\n")
