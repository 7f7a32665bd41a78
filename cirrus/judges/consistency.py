"""How noisy is the judge itself (the library behind ``cirrus
judge-consistency RUN_ID``, :mod:`cirrus.commands.judge_consistency`).

A finished run's ``transcripts.jsonl`` keeps every coverage verdict the judge
gave, with the turn it was given on.  This command draws a reproducible
sample of those verdicts (``--sample``, ``--seed``), asks the judge the very
same question again ``--repeats`` times with the response cache bypassed
(through :func:`cirrus.evaluate.walk.ask_coverage`, exactly as the walk asks
it: the history the agent saw with the turn's query as the last customer
message, the answered checkpoint, the judged checkpoint, the agent's text),
and reports how often the fresh verdicts differ from the saved one.

What is compared
    The judge's own verdict (RR), not the walk's ``ok``: a verdict record's
    ``ok`` is the checkpoint's acceptance, which is also false when the turn's
    tool calls were wrong, whatever the judge said.  Where the tool part
    cannot reject (no reference tool calls, or the right calls made) ``ok`` is
    the judge's verdict; elsewhere the saved verdict is the attempts row's
    ``rr`` (the turn's own checkpoint) or is read from the saved raw answer
    (:func:`saved_judge_verdict`).

Statistics (pure functions: :func:`consistency_stats`)
    * item flip rate: the share of items (with at least one answered fresh
      call) where at least one fresh verdict differs from the saved one, with
      a 95% Wilson interval;
    * verdict flip rate: the share of all answered fresh verdicts that differ
      from the saved one, with a 95% percentile bootstrap interval that
      resamples *items* (the R verdicts of an item are not independent);
    * self-agreement: the share of items (with at least two answered fresh
      calls) whose fresh verdicts all agree with each other (undefined for
      ``--repeats 1``);
    * failed calls (infrastructure errors: API errors after retries, an
      unreadable answer after repair attempts) are counted and left out,
      never counted as flips;

    overall and separately for own-checkpoint items (``j == k``) and
    logical-jump items (``j > k``: the reply to checkpoint ``k`` judged
    against the later checkpoint ``j``).

The result is written to ``reports/<run_id>/judge_consistency.json`` (or
``--output``); nothing else in the run folder changes.  The offline ``local``
judge is deterministic, so it always shows 0 flips.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cirrus.evaluate.saved_run import RunJudge
from cirrus.judges.calibration import wilson_interval
from cirrus.workspace import REPORTS_DIR

if TYPE_CHECKING:
    from cirrus.evaluate.roles import RoleOptions
    from cirrus.evaluate.saved_run import SourceRun
    from cirrus.evaluate.types import CoverageJudge
    from cirrus.schema import Checkpoint
    from cirrus.settings import RoleSettings

OUTPUT_FILE = "judge_consistency.json"
KINDS = ("own", "jump")
BOOTSTRAP_RESAMPLES = 2000
# RoleConfig keywords that change what the judge answers (run.json's params hold them)
_ANSWER_PARAMS = frozenset({"temperature", "max_tokens", "max_tokens_param", "reasoning_effort", "extra_body"})
_LEADING_VERDICT = re.compile(r"\s*(Not Included|Included)\b", re.I)

T = TypeVar("T")


class ConsistencyError(ValueError):
    """The run cannot be measured (a broken transcript, no judge to ask, ...)."""


# ---------------------------------------------------------------------------
# statistics (pure)


def item_flipped(saved: bool, fresh: Sequence[bool | None]) -> bool | None:
    """Whether any answered fresh verdict differs from the saved one; None
    when no fresh call was answered."""
    answered = [v for v in fresh if v is not None]
    return any(v != saved for v in answered) if answered else None


def bootstrap_ratio_ci(numerators: Sequence[int], denominators: Sequence[int], *, seed: int = 0,
                       resamples: int = BOOTSTRAP_RESAMPLES, level: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``sum(numerators) / sum(denominators)``
    resampling the clusters (index ``i`` is one cluster); None without a
    cluster or when every denominator is 0.  Seeded: the same input gives the
    same interval.  With no variation between clusters (e.g. no flip at all)
    the interval is that single value."""
    import numpy as np

    num = np.asarray(numerators, dtype=float)
    den = np.asarray(denominators, dtype=float)
    if num.shape != den.shape:
        raise ValueError(f"{num.size} numerators but {den.size} denominators")
    if num.size == 0 or den.sum() == 0:
        return None
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, num.size, size=(resamples, num.size))
    totals = den[picks].sum(axis=1)
    ratios = num[picks].sum(axis=1)[totals > 0] / totals[totals > 0]
    tail = (1 - level) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return float(low), float(high)


@dataclass(frozen=True, slots=True)
class ConsistencyStats:
    """The judge's consistency on a set of items (see the module notes)."""

    sample: int  # items asked
    calls: int
    failed_calls: int
    items_scored: int  # items with at least one answered fresh call
    items_flipped: int
    item_flip_rate: float | None
    item_flip_rate_ci95: tuple[float, float] | None
    verdicts: int  # answered fresh calls
    verdicts_flipped: int
    verdict_flip_rate: float | None
    verdict_flip_rate_ci95: tuple[float, float] | None
    items_compared: int  # items with at least two answered fresh calls
    items_self_agreeing: int
    self_agreement: float | None

    def as_dict(self) -> dict[str, Any]:
        """The fields of ``judge_consistency.json`` (overall and per kind)."""
        return {"sample": self.sample, "calls": self.calls, "failed_calls": self.failed_calls,
                "item_flip_rate": self.item_flip_rate,
                "item_flip_rate_ci95": list(self.item_flip_rate_ci95) if self.item_flip_rate_ci95 else None,
                "verdict_flip_rate": self.verdict_flip_rate,
                "verdict_flip_rate_ci95": list(self.verdict_flip_rate_ci95) if self.verdict_flip_rate_ci95 else None,
                "self_agreement": self.self_agreement}


def consistency_stats(outcomes: Sequence[tuple[bool, Sequence[bool | None]]], *, seed: int = 0,
                      resamples: int = BOOTSTRAP_RESAMPLES) -> ConsistencyStats:
    """Flip rates and self-agreement of ``(saved verdict, fresh verdicts)``
    pairs, one per item; a fresh verdict ``None`` is a failed call (left out).
    Rates with no item to stand on are None, never NaN."""
    calls = sum(len(fresh) for _, fresh in outcomes)
    answered = [(saved, [v for v in fresh if v is not None]) for saved, fresh in outcomes]
    failed = calls - sum(len(fresh) for _, fresh in answered)
    scored = [(saved, fresh) for saved, fresh in answered if fresh]
    flipped_items = sum(1 for saved, fresh in scored if item_flipped(saved, fresh))
    flips = [sum(v != saved for v in fresh) for saved, fresh in scored]
    sizes = [len(fresh) for _, fresh in scored]
    verdicts = sum(sizes)
    compared = [fresh for _, fresh in scored if len(fresh) >= 2]
    agreeing = sum(1 for fresh in compared if len(set(fresh)) == 1)
    return ConsistencyStats(
        sample=len(outcomes), calls=calls, failed_calls=failed,
        items_scored=len(scored), items_flipped=flipped_items,
        item_flip_rate=flipped_items / len(scored) if scored else None,
        item_flip_rate_ci95=wilson_interval(flipped_items, len(scored)),
        verdicts=verdicts, verdicts_flipped=sum(flips),
        verdict_flip_rate=sum(flips) / verdicts if verdicts else None,
        verdict_flip_rate_ci95=bootstrap_ratio_ci(flips, sizes, seed=seed, resamples=resamples),
        items_compared=len(compared), items_self_agreeing=agreeing,
        self_agreement=agreeing / len(compared) if compared else None,
    )


def draw_sample(items: Sequence[T], n: int, seed: int) -> list[T]:
    """``n`` of ``items`` drawn at random (all of them when there are no more),
    kept in their order; the same ``seed`` draws the same ones."""
    if n < 0:
        raise ValueError("the sample size must be >= 0")
    if n >= len(items):
        return list(items)
    chosen = sorted(random.Random(seed).sample(range(len(items)), n))
    return [items[i] for i in chosen]


# ---------------------------------------------------------------------------
# the saved verdicts


@dataclass(slots=True)
class JudgedItem:
    """One saved coverage verdict with the question the judge was asked."""

    task_id: str
    attempt: int
    turn_checkpoint: int  # k: the checkpoint whose query the turn answered
    judged_checkpoint: int  # j: the checkpoint judged (j > k: a logical jump)
    saved: bool  # the judge's saved verdict (RR)
    history: list[dict[str, Any]]  # what the agent saw, the turn's query last
    answered: Checkpoint  # the task's checkpoint k
    judged: Checkpoint  # the task's checkpoint j
    candidate: str  # the agent's text
    fresh: list[bool | None] = field(default_factory=list)  # None: the call failed

    @property
    def kind(self) -> str:
        return "own" if self.judged_checkpoint == self.turn_checkpoint else "jump"

    def where(self) -> str:
        return (f"task {self.task_id} attempt {self.attempt}, checkpoint {self.judged_checkpoint} judged on the reply "
                f"to checkpoint {self.turn_checkpoint}")

    def record(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "attempt": self.attempt, "turn_checkpoint": self.turn_checkpoint,
                "judged_checkpoint": self.judged_checkpoint, "saved": self.saved, "fresh": list(self.fresh)}


def saved_judge_verdict(record: Mapping[str, Any], turn: Mapping[str, Any], judged: Checkpoint,
                        stats: Mapping[str, Any] | None = None) -> bool | None:
    """The judge's own verdict behind a saved coverage record (``record``, of
    the transcript's ``turn``) on the task's checkpoint ``judged``.

    ``record["ok"]`` is the checkpoint's acceptance (the judge's verdict and,
    when checkpoint ``judged`` has reference tool calls, the turn's calls):
    where the calls cannot reject, it is the judge's verdict.  Else the
    attempts row's ``rr`` (``stats``; the turn's own checkpoint only) or the
    verdict read from the saved raw answer; None when neither says."""
    from cirrus.ingest.cassettes import canonical_json, normalize_arguments
    from cirrus.llm.client import UnparseableOutput
    from cirrus.metrics import accepts

    def canonical(arguments: Any) -> str:
        return canonical_json(normalize_arguments(arguments))

    reference = [(c.name, canonical(c.arguments)) for c in judged.tool_calls]
    made = [(c.get("name", ""), canonical(c.get("arguments")), bool(c.get("recorded")))
            for c in turn.get("tool_calls") or []]
    if accepts(True, reference, made).accepted:
        return bool(record.get("ok"))
    if stats is not None and record.get("checkpoint") == turn.get("checkpoint") and isinstance(stats.get("rr"), bool):
        return stats["rr"]
    from cirrus.judges.verdicts import read_coverage

    raw = str(record.get("raw") or "")
    try:
        return read_coverage(raw)
    except UnparseableOutput:
        # the local judge and a judge panel write their verdict first: "Not Included (offline heuristic: ...)"
        lead = _LEADING_VERDICT.match(raw)
        return lead.group(1).lower() == "included" if lead else None


def check_transcripts(path: Path) -> None:
    """Every line of a finished run's transcripts file is a transcript;
    raise :class:`ConsistencyError` naming ``FILE:LINE: reason`` otherwise."""
    problems: list[str] = []

    def check(row: Any) -> str | None:
        if not isinstance(row, dict):
            return f"a transcript must be a JSON object, not {type(row).__name__}"
        if not isinstance(row.get("task_id"), str) or not isinstance(row.get("attempt"), int):
            return "no task_id (text) and attempt (number)"
        if not isinstance(row.get("turns", []), list):
            return "turns must be a list"
        for index, turn in enumerate(row.get("turns") or []):
            if not isinstance(turn, dict) or not isinstance(turn.get("checkpoint"), int):
                return f"turns[{index}] has no checkpoint number"
            if not isinstance(turn.get("verdicts", []), list) or not isinstance(turn.get("agent_text") or "", str):
                return f"turns[{index}]: verdicts must be a list and agent_text text"
            for number, verdict in enumerate(turn.get("verdicts") or []):
                if not isinstance(verdict, dict) or (verdict.get("kind") == "coverage" and not isinstance(
                        verdict.get("checkpoint"), int)):
                    return f"turns[{index}].verdicts[{number}] is not a verdict record"
        return None

    if not path.is_file():
        raise ConsistencyError(f"{path} is missing: the run has no transcripts to judge again")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"{path}:{number}: not valid JSON ({exc.msg} at column {exc.colno})")
                continue
            problem = check(row)
            if problem:
                problems.append(f"{path}:{number}: {problem}")
    if problems:
        shown = problems[:10]
        more = f"\n... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        raise ConsistencyError("\n".join(shown) + more + "\nrepair or remove these lines (the run's "
                               "transcripts must be whole to be judged again)")


def load_run(workspace: Path, run_id: str) -> SourceRun:
    """The finished run ``reports/<run_id>/`` of ``workspace`` with its tasks
    (:func:`cirrus.evaluate.saved_run.load_source`); :class:`ConsistencyError`
    says what is wrong: no such run (the available ones listed), an
    unfinished run, a damaged transcripts line (``FILE:LINE: reason``),
    tasks that are not the run's."""
    from cirrus.evaluate.saved_run import RescoreError, load_source
    from cirrus.evaluate.store import RUN_FILE, TRANSCRIPTS_FILE
    from cirrus.evaluate.tasks import TaskFileError

    reports = workspace / REPORTS_DIR
    plain = "/" not in run_id and "\\" not in run_id and not run_id.startswith(".")  # else load_source refuses it
    if plain and not (reports / run_id / RUN_FILE).is_file():
        runs = sorted(p.parent.name for p in reports.glob(f"*/{RUN_FILE}")) if reports.is_dir() else []
        shown = ", ".join(f"{name}{'' if (reports / name / 'summary.json').is_file() else ' (unfinished)'}"
                          for name in runs)
        raise ConsistencyError(f"no run {run_id!r} in {reports}; " + (
            f"available runs: {shown}" if runs else "there is no run there: make one with `cirrus eval`")
            + " (or point --workspace at the workspace the run was made in)")
    if plain and (reports / run_id / "summary.json").is_file():  # an unfinished run is load_source's to refuse
        check_transcripts(reports / run_id / TRANSCRIPTS_FILE)
    try:
        return load_source(workspace, run_id)
    except (RescoreError, TaskFileError) as exc:
        raise ConsistencyError(str(exc)) from None
    except (KeyError, TypeError, AttributeError) as exc:  # an attempts.jsonl row without its keys
        raise ConsistencyError(f"run {run_id}: {reports / run_id} holds a damaged attempts record "
                               f"({type(exc).__name__}: {exc}); repair it, or evaluate again under a new "
                               "--run-id") from None


def collect_items(source: SourceRun) -> tuple[list[JudgedItem], int]:
    """Every saved coverage verdict of ``source`` that came from a judge call,
    in file order (task, attempt, turn, judged checkpoint); and how many were
    left out because the judge's own verdict cannot be told (see
    :func:`saved_judge_verdict`)."""
    items: list[JudgedItem] = []
    unknown = 0
    for (task_id, attempt), saved in source.saved.items():
        checkpoints = saved.typed_task.checkpoints
        for turn in saved.turns:
            k = turn.data["checkpoint"]
            seen = turn.history + [{"role": "user", "content": turn.query}]
            for record in turn.data.get("verdicts") or []:
                if record.get("kind") != "coverage" or record.get("raw") is None:
                    continue
                j = record["checkpoint"]
                if not (1 <= k <= j <= len(checkpoints)):
                    raise ConsistencyError(f"run {source.run_id}: task {task_id} attempt {attempt} holds a verdict "
                                           f"on checkpoint {j} of a turn answering checkpoint {k}, which the task "
                                           f"({len(checkpoints)} checkpoints) does not have")
                verdict = saved_judge_verdict(record, turn.data, checkpoints[j - 1], turn.stats)
                if verdict is None:
                    unknown += 1
                    continue
                items.append(JudgedItem(task_id, attempt, k, j, verdict, seen, checkpoints[k - 1],
                                        checkpoints[j - 1], turn.data.get("agent_text") or ""))
    return items, unknown


# ---------------------------------------------------------------------------
# asking again


def bypass_cache(judge: Any) -> None:
    """Turn the response cache off for ``judge`` (and a panel's members): a
    cached answer would be the saved one again, not a fresh judgement."""
    for part in (judge, *getattr(judge, "members", ())):
        if hasattr(part, "cache"):
            part.cache = False


async def ask_again(judge: CoverageJudge, items: Sequence[JudgedItem], repeats: int, concurrency: int = 8,
                    progress: Callable[[], None] | None = None) -> list[str]:
    """Ask ``judge`` each item's question ``repeats`` times, at most
    ``concurrency`` calls at once; fills ``item.fresh`` (None for a failed
    call) and returns the failures' messages.  An endpoint error that is not
    one call's failure (a refused key) propagates."""
    from cirrus.evaluate.types import InfrastructureError
    from cirrus.evaluate.walk import ask_coverage

    semaphore = asyncio.Semaphore(max(1, concurrency))
    errors: list[str] = []
    for item in items:
        item.fresh = [None] * repeats

    async def one(item: JudgedItem, repeat: int) -> None:
        async with semaphore:
            try:
                verdict = await ask_coverage(judge, item.history, item.answered, item.judged, item.candidate)
                if verdict is None:
                    errors.append(f"{item.where()}: the reference has no text (the tasks changed since the run?)")
                else:
                    item.fresh[repeat] = bool(verdict.ok)
            except InfrastructureError as exc:
                errors.append(f"{item.where()}: {type(exc).__name__}: {exc}")
        if progress is not None:
            progress()

    await asyncio.gather(*(one(item, repeat) for item in items for repeat in range(repeats)))
    return errors


# ---------------------------------------------------------------------------
# which judge


def judge_options(recorded: RunJudge, configured: RoleSettings, model: str | None, base_url: str | None,
                  api_key_env: str | None) -> RoleOptions:
    """The judge to ask: the options given, else the run's own judge (from
    ``run.json``), else cirrus.toml's ``[roles.judge]``.  The run's base URL,
    key variable and parameters are used only when the model is the run's."""
    from cirrus.evaluate.roles import LOCAL, RoleOptions

    name = model or recorded.model or configured.model
    if not name:
        raise ConsistencyError("run.json does not say which judge made the run: give one with --judge-model "
                               "(a model name, or 'local')")
    if name == LOCAL:
        return RoleOptions(LOCAL)
    if name != recorded.model:  # another judge than the run's: cirrus.toml's settings, as judge-eval takes them
        return RoleOptions(name, base_url or configured.base_url, api_key_env or configured.api_key_env,
                           configured.params())
    if base_url is None and recorded.base_url and "***" in recorded.base_url:
        if not configured.base_url:
            raise ConsistencyError(f"run.json shows the judge's base URL with its credentials masked "
                                   f"({recorded.base_url}): give the full URL with --judge-base-url")
        base_url = configured.base_url
    url = base_url or recorded.base_url or configured.base_url
    key = api_key_env
    if key is None and len(recorded.api_key_envs) == 1:
        key = recorded.api_key_envs[0]
    key = key or configured.api_key_env
    if key is None and len(recorded.api_key_envs) > 1:
        raise ConsistencyError(f"the run used several API-key variables ({', '.join(recorded.api_key_envs)}): "
                               "say which one is the judge's with --judge-api-key-env")
    params = {k: v for k, v in configured.params().items() if k not in _ANSWER_PARAMS}
    return RoleOptions(name, url, key, {**params, **recorded.params})


# ---------------------------------------------------------------------------
# the result


def percent(value: float) -> str:
    """``0.125`` as ``12.5%`` (``0.5`` as ``50%``)."""
    return f"{value * 100:.1f}".removesuffix(".0") + "%"


def ci95_text(ci: Sequence[float] | None) -> str:
    """A 95% interval of shares as ``95% CI 10.0-30.0%``."""
    return f"95% CI {ci[0] * 100:.1f}-{ci[1] * 100:.1f}%" if ci else "no interval"


def reading(stats: ConsistencyStats) -> str:
    """The result in one line."""
    if stats.item_flip_rate is None:
        return "no item could be judged again (every call failed)"
    return (f"the judge changed its mind on {stats.items_flipped} of {stats.items_scored} items "
            f"({percent(stats.item_flip_rate)}, {ci95_text(stats.item_flip_rate_ci95)})")


def consistency_result(source: SourceRun, asked: Sequence[JudgedItem], items_available: int, repeats: int,
                       seed: int, judge_name: str, fingerprint: Any) -> tuple[dict[str, ConsistencyStats],
                                                                               dict[str, Any]]:
    """The statistics of the items ``asked`` again (``"all"`` and one per
    kind of :data:`KINDS`) and the ``judge_consistency.json`` record of the
    measurement (the statistics, the settings and every item)."""
    stats = {"all": consistency_stats([(i.saved, i.fresh) for i in asked], seed=seed)}
    for kind in KINDS:
        stats[kind] = consistency_stats([(i.saved, i.fresh) for i in asked if i.kind == kind], seed=seed)
    result = {
        "run_id": source.run_id, "judge": judge_name, "judge_fingerprint": fingerprint,
        "sample": len(asked), "repeats": repeats, "seed": seed, "items_available": items_available,
        **{k: v for k, v in stats["all"].as_dict().items() if k != "sample"},
        "by_kind": {kind: stats[kind].as_dict() for kind in KINDS},
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "items": [item.record() for item in asked],
    }
    return stats, result


def write_result(target: Path, result: Mapping[str, Any]) -> None:
    """``result`` as ``judge_consistency.json`` at ``target``, atomically
    (a :class:`~cirrus.files.DiskFullError` or ``OSError`` when it cannot)."""
    from cirrus.files import atomic_writer

    with atomic_writer(target) as handle:
        handle.write(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
