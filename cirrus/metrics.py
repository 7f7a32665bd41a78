"""Metrics of contract section 4, as pure functions (no I/O, no numpy).

Three levels:

* one checkpoint decision: :func:`accepts` turns the judge's RR verdict, the
  reference tool calls ``T_k`` and the calls made in the agent's turn into
  RR, TIA, TSA, TEV and ``accepted``;
* one (task, attempt): :class:`WalkOutcome` holds what the walk counted
  (``K``, ``covered``, ``accepted_turns``, the STL of every accepted turn) and
  :func:`task_metrics` derives TPR, LJ, NEI, MTL and ``success``;
* the dataset: :func:`dataset_metrics` averages :class:`AttemptRow` rows with
  ``status = "ok"`` (ATPR, ALJ, ANEI, AMTL, SR pass@1) and estimates SR pass@k
  and pass^k per task with :func:`pass_at_k` and :func:`pass_hat_k`.

Every score is a plain ``float`` or ``None`` (undefined); never NaN.

Decisions where the contract leaves room (documented here and in the
functions):

* ``T_k`` is compared as a **set** of ``(name, canonical arguments)`` pairs:
  a reference call listed twice is satisfied by one matching call made in the
  turn.  The contract reads "every call of ``T_k`` ... was made", which is a
  membership test; and replay answers a repeated call from the cassette in
  any case, so counting repetitions would judge the agent on how often it
  re-asked, not on whether it asked the right thing.
* ``accepted`` with an empty ``T_k`` rests on RR alone, as the contract says:
  a turn that calls a tool where the reference called none gets TIA = false,
  which is reported, but is still accepted when RR holds.
* ``n_tasks`` counts distinct task ids over **all** rows, error rows
  included: it is the size of the run, while ``errors`` and ``n_ok`` say how
  much of it was scored.
* pass@k / pass^k for ``n < k`` are undefined: :func:`pass_at_k` and
  :func:`pass_hat_k` raise ``ValueError``; :func:`dataset_metrics` leaves such
  tasks out of both means, and reports ``None`` when no task qualifies.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

__all__ = [
    "AttemptRow",
    "CheckpointDecision",
    "DatasetMetrics",
    "TaskMetrics",
    "WalkOutcome",
    "accepts",
    "dataset_metrics",
    "pass_at_k",
    "pass_hat_k",
    "task_metrics",
]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _mean(values: Sequence[float]) -> float | None:
    """Mean as a float; ``None`` for no values (never NaN)."""
    if not values:
        return None
    return math.fsum(values) / len(values)


# --------------------------------------------------------------------------
# One checkpoint
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckpointDecision:
    """The verdicts of ``accepts(response, k)`` (contract section 4).

    ``tsa`` and ``tev`` are ``None`` when the checkpoint has no reference
    tool calls.
    """

    accepted: bool
    rr: bool
    tia: bool
    tsa: bool | None
    tev: bool | None


def accepts(
    rr: bool,
    reference_calls: Iterable[tuple[str, str]],
    calls_made: Iterable[tuple[str, str, bool]],
) -> CheckpointDecision:
    """Decide whether one agent turn covers one checkpoint.

    ``rr``: the coverage judge's verdict on the reference reply ``R_k``; the
    caller passes ``True`` when ``R_k`` is empty (a turn of tool calls only).

    ``reference_calls``: ``T_k`` as ``(name, canonical_arguments)`` pairs.

    ``calls_made``: every tool call of the turn as ``(name,
    canonical_arguments, answered_from_cassette)``.

    Arguments are compared as strings: pass both sides through the same
    canonicalisation (``cirrus.ingest.cassettes.canonical_arguments``, the
    one cassettes are matched with).

    * TIA = (the turn called any tool) == (``T_k`` is non-empty);
    * TSA = every tool name of ``T_k`` was called (``None`` when ``T_k`` is
      empty);
    * TEV = every distinct ``(name, arguments)`` of ``T_k`` was made in the
      turn and answered from the cassette at least once (``None`` when
      ``T_k`` is empty).  ``T_k`` is a set: a reference call listed twice
      needs one matching call, not two;
    * accepted = RR and, when ``T_k`` is non-empty, TIA and TSA and TEV; when
      ``T_k`` is empty, RR alone (an extra tool call shows as TIA = false but
      does not reject the turn).
    """
    rr = bool(rr)
    reference = {(str(name), str(args)) for name, args in reference_calls}
    made = [(str(name), str(args), bool(answered)) for name, args, answered in calls_made]

    tia = bool(made) == bool(reference)
    if not reference:
        return CheckpointDecision(accepted=rr, rr=rr, tia=tia, tsa=None, tev=None)

    names_called = {name for name, _, _ in made}
    tsa = all(name in names_called for name, _ in reference)
    answered = {(name, args) for name, args, ok in made if ok}
    tev = reference <= answered
    return CheckpointDecision(accepted=rr and tia and tsa and tev, rr=rr, tia=tia, tsa=tsa, tev=tev)


# --------------------------------------------------------------------------
# One (task, attempt)
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WalkOutcome:
    """What the walk of one (task, attempt) counted.

    ``checkpoints`` is ``K``; ``covered`` the last checkpoint covered (0 when
    checkpoint 1 was not); ``accepted_turns`` the agent turns accepted;
    ``stl_accepted`` the output tokens of each accepted turn, in order;
    ``stl_rejected`` those of the turn whose rejection ended the walk (None
    when no turn was rejected).  Inconsistent values raise ``ValueError``.
    """

    checkpoints: int
    covered: int
    accepted_turns: int
    stl_accepted: tuple[int, ...] = ()
    stl_rejected: int | None = None

    def __post_init__(self) -> None:
        stl = tuple(self.stl_accepted)
        object.__setattr__(self, "stl_accepted", stl)
        for name in ("checkpoints", "covered", "accepted_turns"):
            if not _is_int(getattr(self, name)):
                raise ValueError(f"{name} must be an int, got {getattr(self, name)!r}")
        if self.checkpoints < 1:
            raise ValueError(f"checkpoints must be >= 1, got {self.checkpoints}")
        if not 0 <= self.covered <= self.checkpoints:
            raise ValueError(f"covered must be in [0, {self.checkpoints}], got {self.covered}")
        if not 0 <= self.accepted_turns <= self.covered:
            raise ValueError(f"accepted_turns must be in [0, covered={self.covered}], got {self.accepted_turns}")
        if self.covered >= 1 and self.accepted_turns < 1:
            raise ValueError("covered >= 1 needs at least one accepted turn")
        if len(stl) != self.accepted_turns:
            raise ValueError(f"stl_accepted has {len(stl)} values for {self.accepted_turns} accepted turns")
        for tokens in stl if self.stl_rejected is None else (*stl, self.stl_rejected):
            if not _is_int(tokens) or tokens < 0:
                raise ValueError(f"every STL must be an int >= 0, got {tokens!r}")


@dataclass(frozen=True, slots=True)
class TaskMetrics:
    """TPR, LJ, NEI, MTL and success of one (task, attempt)."""

    checkpoints: int
    covered: int
    accepted_turns: int
    tpr: float
    lj: int
    nei: float
    mtl: float | None  # None (never NaN) when nothing was accepted
    success: bool
    # the paper's Algorithm 1: every turn's STL, the rejected one included,
    # over the checkpoints covered; None when nothing was covered
    mtl_alg1: float | None = None


def task_metrics(outcome: WalkOutcome) -> TaskMetrics:
    """Contract section 4, per (task, attempt)::

        TPR = covered / K
        LJ  = covered - accepted_turns
        NEI = LJ / (covered - 1) if covered > 1 else (1 if covered == 1 else 0)
        MTL = mean(stl_accepted)      # None when nothing was accepted
        success = (covered == K)

    and, beside MTL, the paper's Algorithm 1 (which the paper's text does not
    follow)::

        MTL_alg1 = (sum(stl_accepted) + stl_rejected) / covered   # None when covered == 0
    """
    covered = outcome.covered
    lj = covered - outcome.accepted_turns
    if covered > 1:
        nei = lj / (covered - 1)
    elif covered == 1:
        nei = 1.0
    else:
        nei = 0.0
    return TaskMetrics(
        checkpoints=outcome.checkpoints,
        covered=covered,
        accepted_turns=outcome.accepted_turns,
        tpr=covered / outcome.checkpoints,
        lj=lj,
        nei=float(nei),
        mtl=_mean([float(t) for t in outcome.stl_accepted]),
        success=covered == outcome.checkpoints,
        mtl_alg1=(sum(outcome.stl_accepted) + (outcome.stl_rejected or 0)) / covered if covered else None,
    )


# --------------------------------------------------------------------------
# pass@k and pass^k
# --------------------------------------------------------------------------


def _check_nck(n: int, c: int, k: int) -> None:
    for name, value in (("n", n), ("c", c), ("k", k)):
        if not _is_int(value):
            raise ValueError(f"{name} must be an int, got {value!r}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not 0 <= c <= n:
        raise ValueError(f"c must be in [0, n={n}], got {c}")
    if n < k:
        raise ValueError(f"pass@k is undefined for n={n} < k={k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimator (Chen et al. 2021, HumanEval):
    ``1 - C(n-c, k) / C(n, k)``, the chance that ``k`` of the ``n`` attempts,
    drawn without replacement, hold at least one success.  ``1.0`` when
    ``n - c < k``.  Computed exactly (integers) and rounded once.
    Raises ``ValueError`` for ``n < k`` (undefined) and bad arguments."""
    _check_nck(n, c, k)
    if n - c < k:
        return 1.0
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k estimator: ``C(c, k) / C(n, k)``, the chance that ``k`` of the
    ``n`` attempts, drawn without replacement, all succeed.  ``0.0`` when
    ``c < k``.  Raises ``ValueError`` for ``n < k`` and bad arguments."""
    _check_nck(n, c, k)
    return float(Fraction(math.comb(c, k), math.comb(n, k)))


# --------------------------------------------------------------------------
# Dataset
# --------------------------------------------------------------------------

Status = Literal["ok", "error"]


@dataclass(slots=True)
class AttemptRow:
    """One (task, attempt), as in ``tasks.parquet``.

    Rows with ``status = "error"`` are counted but never scored, so their
    score fields may be ``None``; rows with ``status = "ok"`` must carry
    ``covered``, ``tpr``, ``lj``, ``nei`` and ``success`` (``mtl`` is ``None``
    exactly when nothing was accepted).
    """

    task_id: str
    attempt: int
    status: Status
    covered: int | None
    checkpoints: int
    accepted_turns: int | None
    tpr: float | None
    lj: int | None
    nei: float | None
    mtl: float | None
    success: bool | None
    mtl_alg1: float | None = None  # absent from rows of runs made before it existed

    @classmethod
    def ok(cls, task_id: str, attempt: int, metrics: TaskMetrics) -> AttemptRow:
        """An ok row from the metrics of its walk."""
        return cls(
            task_id=task_id,
            attempt=attempt,
            status="ok",
            covered=metrics.covered,
            checkpoints=metrics.checkpoints,
            accepted_turns=metrics.accepted_turns,
            tpr=metrics.tpr,
            lj=metrics.lj,
            nei=metrics.nei,
            mtl=metrics.mtl,
            success=metrics.success,
            mtl_alg1=metrics.mtl_alg1,
        )

    @classmethod
    def error(cls, task_id: str, attempt: int, checkpoints: int) -> AttemptRow:
        """An error row (infrastructure failure): no scores."""
        return cls(
            task_id=task_id,
            attempt=attempt,
            status="error",
            covered=None,
            checkpoints=checkpoints,
            accepted_turns=None,
            tpr=None,
            lj=None,
            nei=None,
            mtl=None,
            success=None,
        )


@dataclass(frozen=True, slots=True)
class DatasetMetrics:
    """Contract section 4, dataset level.  ``None`` where undefined."""

    k: int
    n_tasks: int  # distinct task ids over all rows, error rows included
    n_ok: int  # rows with status "ok"
    errors: int  # rows with status "error"
    atpr: float | None  # mean TPR over ok rows
    alj: float | None  # mean LJ over ok rows with covered >= 1
    anei: float | None  # mean NEI over ok rows with covered >= 1
    amtl: float | None  # mean MTL over ok rows with covered >= 1 (and an MTL)
    sr_pass1: float | None  # mean success over ok rows
    pass_at_k: float | None  # mean pass@k over tasks with n >= k ok attempts
    pass_hat_k: float | None  # mean pass^k over the same tasks
    n_tasks_k: int  # tasks that entered pass@k / pass^k
    per_task: dict[str, tuple[int, int]] = field(default_factory=dict)  # task_id -> (n ok, c successes)
    amtl_alg1: float | None = None  # mean MTL_alg1 over ok rows with covered >= 1 that have one

    def summary(self) -> dict[str, Any]:
        """The score part of ``summary.json``: ``n_tasks``, ``atpr``, ``alj``,
        ``anei``, ``amtl``, ``sr`` (``pass@1`` and ``pass@K``), ``pass^K``,
        ``errors``.  For ``K = 1`` the ``sr`` object holds only ``pass@1``, the
        contract's "mean success" over ok rows."""
        sr: dict[str, float | None] = {"pass@1": self.sr_pass1}
        if self.k != 1:
            sr[f"pass@{self.k}"] = self.pass_at_k
        return {
            "n_tasks": self.n_tasks,
            "atpr": self.atpr,
            "alj": self.alj,
            "anei": self.anei,
            "amtl": self.amtl,
            "amtl_alg1": self.amtl_alg1,
            "sr": sr,
            f"pass^{self.k}": self.pass_hat_k,
            "errors": self.errors,
        }


def _finite(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _required(row: AttemptRow, name: str) -> Any:
    value = getattr(row, name)
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        raise ValueError(f"ok row ({row.task_id!r}, {row.attempt}) has no {name}")
    return value


def dataset_metrics(rows: Iterable[AttemptRow], k: int) -> DatasetMetrics:
    """Aggregate (task, attempt) rows (contract section 4).

    Over rows with ``status = "ok"``: ATPR = mean TPR; ALJ, ANEI, AMTL = means
    over those with ``covered >= 1`` (AMTL also needs an MTL, which such rows
    always have); SR pass@1 = mean success.  Per task with ``n`` ok attempts
    and ``c`` successes: pass@k = mean of :func:`pass_at_k`, pass^k = mean of
    :func:`pass_hat_k`, over the tasks with ``n >= k``.  Error rows are left
    out of every score but counted in ``errors`` (and their tasks in
    ``n_tasks``).  A duplicated (task_id, attempt) or an unknown status
    raises ``ValueError``.
    """
    if not _is_int(k) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    rows = list(rows)
    seen: set[tuple[str, int]] = set()
    task_ids: set[str] = set()
    errors = 0
    tpr: list[float] = []
    lj: list[float] = []
    nei: list[float] = []
    mtl: list[float] = []
    mtl_alg1: list[float] = []
    success: list[float] = []
    per_task: dict[str, list[int]] = {}
    for row in rows:
        key = (row.task_id, row.attempt)
        if key in seen:
            raise ValueError(f"duplicate row for task {row.task_id!r}, attempt {row.attempt}")
        seen.add(key)
        task_ids.add(row.task_id)
        if row.status == "error":
            errors += 1
            continue
        if row.status != "ok":
            raise ValueError(f"unknown status {row.status!r} for task {row.task_id!r}, attempt {row.attempt}")
        covered = _required(row, "covered")
        ok_success = bool(_required(row, "success"))
        tpr.append(float(_required(row, "tpr")))
        success.append(1.0 if ok_success else 0.0)
        counts = per_task.setdefault(row.task_id, [0, 0])
        counts[0] += 1
        counts[1] += int(ok_success)
        if covered >= 1:
            lj.append(float(_required(row, "lj")))
            nei.append(float(_required(row, "nei")))
            row_mtl = _finite(row.mtl)
            if row_mtl is not None:
                mtl.append(row_mtl)
            row_alg1 = _finite(row.mtl_alg1)
            if row_alg1 is not None:
                mtl_alg1.append(row_alg1)

    at_k: list[float] = []
    hat_k: list[float] = []
    for n, c in per_task.values():
        if n >= k:
            at_k.append(pass_at_k(n, c, k))
            hat_k.append(pass_hat_k(n, c, k))

    return DatasetMetrics(
        k=k,
        n_tasks=len(task_ids),
        n_ok=len(tpr),
        errors=errors,
        atpr=_mean(tpr),
        alj=_mean(lj),
        anei=_mean(nei),
        amtl=_mean(mtl),
        sr_pass1=_mean(success),
        pass_at_k=_mean(at_k),
        pass_hat_k=_mean(hat_k),
        n_tasks_k=len(at_k),
        per_task={task: (n, c) for task, (n, c) in per_task.items()},
        amtl_alg1=_mean(mtl_alg1),
    )
