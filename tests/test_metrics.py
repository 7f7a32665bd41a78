"""Metrics of contract section 4 (cirrus.metrics): hand-computed cases,
brute-force pass@k / pass^k, and properties."""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cirrus.metrics import (
    AttemptRow,
    CheckpointDecision,
    DatasetMetrics,
    WalkOutcome,
    accepts,
    dataset_metrics,
    pass_at_k,
    pass_hat_k,
    task_metrics,
)

# --------------------------------------------------------------------------
# Per (task, attempt)
# --------------------------------------------------------------------------


def test_perfect_walk() -> None:
    m = task_metrics(WalkOutcome(checkpoints=4, covered=4, accepted_turns=4, stl_accepted=(10, 20, 30, 40)))
    assert m.tpr == 1.0
    assert m.lj == 0
    assert m.nei == 0.0
    assert m.mtl == 25.0
    assert m.success is True


def test_jumping_agent() -> None:
    # one reply covers checkpoints 1-3, another covers 4
    m = task_metrics(WalkOutcome(checkpoints=4, covered=4, accepted_turns=2, stl_accepted=(100, 51)))
    assert m.tpr == 1.0
    assert m.lj == 2
    assert m.nei == pytest.approx(2 / 3)
    assert m.nei == 2 / 3
    assert m.mtl == 75.5
    assert m.success is True


def test_partial_walk_with_jump() -> None:
    # covered 3 of 5 in 2 turns: LJ 1, NEI 1/2
    m = task_metrics(WalkOutcome(checkpoints=5, covered=3, accepted_turns=2, stl_accepted=(7, 8)))
    assert (m.tpr, m.lj, m.nei, m.mtl, m.success) == (0.6, 1, 0.5, 7.5, False)


def test_failing_at_checkpoint_one() -> None:
    m = task_metrics(WalkOutcome(checkpoints=3, covered=0, accepted_turns=0, stl_accepted=()))
    assert m.tpr == 0.0
    assert m.lj == 0
    assert m.nei == 0.0
    assert isinstance(m.nei, float)
    assert m.mtl is None
    assert m.success is False


def test_covered_one_has_nei_one() -> None:
    m = task_metrics(WalkOutcome(checkpoints=3, covered=1, accepted_turns=1, stl_accepted=(12,)))
    assert m.tpr == 1 / 3
    assert m.lj == 0
    assert m.nei == 1.0
    assert isinstance(m.nei, float)
    assert m.mtl == 12.0
    assert m.success is False


def test_everything_in_one_reply() -> None:
    m = task_metrics(WalkOutcome(checkpoints=3, covered=3, accepted_turns=1, stl_accepted=(300,)))
    assert (m.tpr, m.lj, m.nei, m.mtl, m.success) == (1.0, 2, 1.0, 300.0, True)


def test_single_checkpoint_tasks() -> None:
    ok = task_metrics(WalkOutcome(checkpoints=1, covered=1, accepted_turns=1, stl_accepted=(5,)))
    assert (ok.tpr, ok.lj, ok.nei, ok.mtl, ok.success) == (1.0, 0, 1.0, 5.0, True)
    failed = task_metrics(WalkOutcome(checkpoints=1, covered=0, accepted_turns=0))
    assert (failed.tpr, failed.lj, failed.nei, failed.mtl, failed.success) == (0.0, 0, 0.0, None, False)


def test_task_metrics_are_plain_floats() -> None:
    m = task_metrics(WalkOutcome(checkpoints=2, covered=2, accepted_turns=2, stl_accepted=(1, 2)))
    assert type(m.tpr) is float and type(m.nei) is float and type(m.mtl) is float
    assert type(m.lj) is int and type(m.success) is bool


def test_stl_list_becomes_tuple() -> None:
    outcome = WalkOutcome(checkpoints=2, covered=1, accepted_turns=1, stl_accepted=[4])  # type: ignore[arg-type]
    assert outcome.stl_accepted == (4,)
    hash(outcome)


@pytest.mark.parametrize(
    ("checkpoints", "covered", "accepted_turns", "stl"),
    [
        (0, 0, 0, ()),  # K < 1
        (3, 4, 1, (1,)),  # covered > K
        (3, -1, 0, ()),  # covered < 0
        (3, 2, 3, (1, 1, 1)),  # accepted_turns > covered
        (3, 2, -1, ()),  # accepted_turns < 0
        (3, 2, 0, ()),  # covered without an accepted turn
        (3, 2, 2, (1,)),  # one STL short
        (3, 2, 1, (1, 2)),  # one STL too many
        (3, 1, 1, (-1,)),  # negative STL
        (3, 1, 1, (1.5,)),  # non-integer STL
        (3.0, 1, 1, (1,)),  # non-integer K
        (True, 1, 1, (1,)),  # bool is not a count
    ],
)
def test_walk_outcome_validation(checkpoints, covered, accepted_turns, stl) -> None:
    with pytest.raises(ValueError):
        WalkOutcome(checkpoints=checkpoints, covered=covered, accepted_turns=accepted_turns, stl_accepted=stl)


def _walk(k_max: int, accept: set[tuple[int, int]], fluent: set[int], stl: int = 3) -> WalkOutcome:
    """The contract's pseudo-code, with ``accept`` holding (turn's k, j)
    pairs that the turn answering checkpoint k also covers and ``fluent``
    the k after which the next query still follows."""
    k = 1
    covered = 0
    accepted_turns = 0
    stl_accepted: list[int] = []
    while k <= k_max:
        if (k, k) not in accept:
            break
        j = k
        while j < k_max and (k, j + 1) in accept:
            j += 1
        accepted_turns += 1
        stl_accepted.append(stl)
        covered = j
        if j == k_max:
            break
        k = j + 1
        if j not in fluent:
            break
    return WalkOutcome(k_max, covered, accepted_turns, tuple(stl_accepted))


@st.composite
def _walks(draw) -> WalkOutcome:
    k_max = draw(st.integers(1, 8))
    pairs = [(k, j) for k in range(1, k_max + 1) for j in range(k, k_max + 1)]
    accept = set(draw(st.lists(st.sampled_from(pairs), unique=True))) if pairs else set()
    fluent = set(draw(st.lists(st.integers(1, k_max), unique=True)))
    return _walk(k_max, accept, fluent)


@given(_walks())
def test_walk_outcomes_are_valid_and_bounded(outcome: WalkOutcome) -> None:
    m = task_metrics(outcome)
    assert 0.0 <= m.tpr <= 1.0
    assert 0 <= m.lj <= max(outcome.covered - 1, 0)
    assert 0.0 <= m.nei <= 1.0
    assert (m.mtl is None) == (outcome.covered == 0)
    assert m.success == (m.tpr == 1.0)
    assert not any(isinstance(v, float) and math.isnan(v) for v in (m.tpr, m.nei, m.mtl))


def test_walk_pseudo_code_hand_cases() -> None:
    # the turn for k=1 covers 1-3, the turn for k=4 covers 4
    assert _walk(4, {(1, 1), (1, 2), (1, 3), (4, 4)}, {3}) == WalkOutcome(4, 4, 2, (3, 3))
    # a later checkpoint alone does not extend the jump: coverage must be contiguous
    assert _walk(4, {(1, 1), (1, 3)}, {1}) == WalkOutcome(4, 1, 1, (3,))


# --------------------------------------------------------------------------
# One checkpoint decision
# --------------------------------------------------------------------------

A = ("DescribeInstance", '{"instance_id":"i-1"}')
A_OTHER_ARGS = ("DescribeInstance", '{"instance_id":"i-2"}')
B = ("RebootInstance", '{"instance_id":"i-1"}')


def made(call: tuple[str, str], answered: bool = True) -> tuple[str, str, bool]:
    return (call[0], call[1], answered)


def test_no_reference_tools_no_calls() -> None:
    assert accepts(True, [], []) == CheckpointDecision(accepted=True, rr=True, tia=True, tsa=None, tev=None)
    assert accepts(False, [], []) == CheckpointDecision(accepted=False, rr=False, tia=True, tsa=None, tev=None)


def test_no_reference_tools_but_a_call_made() -> None:
    # TIA is false and reported; acceptance rests on RR alone when T_k is
    # empty (contract: "When T_k is empty, acceptance rests on RR alone").
    d = accepts(True, [], [made(A)])
    assert d == CheckpointDecision(accepted=True, rr=True, tia=False, tsa=None, tev=None)
    assert accepts(False, [], [made(A)]).accepted is False


def test_reference_tools_right_calls_answered() -> None:
    d = accepts(True, [A, B], [made(B), made(A)])
    assert d == CheckpointDecision(accepted=True, rr=True, tia=True, tsa=True, tev=True)


def test_reference_tools_extra_calls_are_fine() -> None:
    d = accepts(True, [A], [made(A_OTHER_ARGS, answered=False), made(A), made(B)])
    assert d == CheckpointDecision(accepted=True, rr=True, tia=True, tsa=True, tev=True)


def test_reference_tools_no_calls() -> None:
    d = accepts(True, [A], [])
    assert d == CheckpointDecision(accepted=False, rr=True, tia=False, tsa=False, tev=False)


def test_right_name_wrong_arguments() -> None:
    d = accepts(True, [A], [made(A_OTHER_ARGS, answered=False)])
    assert d == CheckpointDecision(accepted=False, rr=True, tia=True, tsa=True, tev=False)


def test_missing_tool_name() -> None:
    d = accepts(True, [A, B], [made(A)])
    assert d == CheckpointDecision(accepted=False, rr=True, tia=True, tsa=False, tev=False)


def test_call_not_answered_from_cassette() -> None:
    d = accepts(True, [A], [made(A, answered=False)])
    assert d == CheckpointDecision(accepted=False, rr=True, tia=True, tsa=True, tev=False)


def test_call_answered_once_of_several() -> None:
    d = accepts(True, [A], [made(A, answered=False), made(A, answered=True)])
    assert d.tev is True and d.accepted is True


def test_rr_false_with_right_tools() -> None:
    d = accepts(False, [A], [made(A)])
    assert d == CheckpointDecision(accepted=False, rr=False, tia=True, tsa=True, tev=True)


def test_empty_reference_reply_means_rr_true_from_caller() -> None:
    # a tool-only checkpoint: the caller passes rr=True
    assert accepts(True, [A], [made(A)]).accepted is True


def test_duplicated_reference_call_is_a_set() -> None:
    # T_k lists A twice; one answered call A is enough
    d = accepts(True, [A, A], [made(A)])
    assert d == CheckpointDecision(accepted=True, rr=True, tia=True, tsa=True, tev=True)
    assert accepts(True, [A, A], [made(A), made(A)]) == d


def test_accepts_takes_iterators() -> None:
    d = accepts(True, iter([A]), iter([made(A)]))
    assert d.accepted is True


@given(
    rr=st.booleans(),
    reference=st.lists(st.sampled_from([A, A_OTHER_ARGS, B]), max_size=4),
    calls=st.lists(st.tuples(st.sampled_from([A, A_OTHER_ARGS, B]), st.booleans()), max_size=5),
)
def test_accepts_properties(rr, reference, calls) -> None:
    d = accepts(rr, reference, [made(c, ok) for c, ok in calls])
    assert d.rr == rr
    assert d.tia == (bool(calls) == bool(reference))
    if not reference:
        assert d.tsa is None and d.tev is None and d.accepted == rr
    else:
        assert d.accepted == (rr and d.tia and d.tsa and d.tev)
        # TEV implies TSA implies TIA
        assert not d.tev or d.tsa
        assert not d.tsa or d.tia


# --------------------------------------------------------------------------
# pass@k and pass^k
# --------------------------------------------------------------------------


def _brute(n: int, c: int, k: int) -> tuple[Fraction, Fraction]:
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(combinations(outcomes, k))
    any_ok = sum(1 for s in subsets if any(s))
    all_ok = sum(1 for s in subsets if all(s))
    return Fraction(any_ok, len(subsets)), Fraction(all_ok, len(subsets))


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_brute_force(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            at, hat = _brute(n, c, k)
            assert pass_at_k(n, c, k) == float(at)
            assert pass_hat_k(n, c, k) == float(hat)


def test_pass_at_k_known_values() -> None:
    assert pass_at_k(2, 1, 1) == 0.5
    assert pass_at_k(2, 1, 2) == 1.0
    assert pass_hat_k(2, 1, 2) == 0.0
    assert pass_hat_k(2, 1, 1) == 0.5
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_hat_k(5, 5, 3) == 1.0
    assert pass_at_k(4, 2, 3) == 1.0  # n - c < k
    assert pass_at_k(10, 3, 2) == pytest.approx(1 - 21 / 45)
    assert pass_hat_k(10, 3, 2) == pytest.approx(3 / 45)


def test_pass_at_k_large_n_is_finite() -> None:
    assert pass_at_k(2000, 1, 1000) == 0.5
    assert pass_hat_k(2000, 1999, 1000) == 0.5
    assert 0.0 <= pass_at_k(3000, 7, 50) <= 1.0


@pytest.mark.parametrize(("n", "c", "k"), [(1, 0, 2), (3, 4, 1), (3, -1, 1), (3, 1, 0), (0, 0, 1), (2.0, 1, 1)])
def test_pass_at_k_rejects_bad_arguments(n, c, k) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


@st.composite
def _nck(draw) -> tuple[int, int, int]:
    n = draw(st.integers(1, 60))
    c = draw(st.integers(0, n))
    k = draw(st.integers(1, n))
    return n, c, k


@given(_nck())
def test_pass_at_k_properties(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    at, hat = pass_at_k(n, c, k), pass_hat_k(n, c, k)
    assert 0.0 <= hat <= 1.0 and 0.0 <= at <= 1.0
    # pass^k <= c/n = pass@1 = pass^1 <= pass@k
    assert pass_at_k(n, c, 1) == pass_hat_k(n, c, 1) == pytest.approx(c / n)
    assert hat <= c / n + 1e-12
    assert c / n <= at + 1e-12
    if k < n:
        # pass@k does not decrease with k; pass^k does not increase
        assert pass_at_k(n, c, k + 1) >= at
        assert pass_hat_k(n, c, k + 1) <= hat


# --------------------------------------------------------------------------
# Dataset
# --------------------------------------------------------------------------


def _ok(task: str, attempt: int, checkpoints: int, covered: int, accepted: int, stl: tuple[int, ...]) -> AttemptRow:
    return AttemptRow.ok(task, attempt, task_metrics(WalkOutcome(checkpoints, covered, accepted, stl)))


def _rows() -> list[AttemptRow]:
    return [
        # T1: 2 ok attempts, 1 success
        _ok("T1", 0, 4, 4, 2, (100, 50)),  # tpr 1, lj 2, nei 2/3, mtl 75, success
        _ok("T1", 1, 4, 0, 0, ()),  # tpr 0, failed at checkpoint 1
        # T2: 2 ok attempts (+ 1 error), 2 successes
        _ok("T2", 0, 1, 1, 1, (10,)),  # tpr 1, lj 0, nei 1, mtl 10, success
        _ok("T2", 1, 1, 1, 1, (30,)),  # tpr 1, lj 0, nei 1, mtl 30, success
        AttemptRow.error("T2", 2, 1),
        # T3: 1 ok attempt, no success (n < k for k = 2)
        _ok("T3", 0, 3, 2, 2, (5, 15)),  # tpr 2/3, lj 0, nei 0, mtl 10
        # T4: errors only
        AttemptRow.error("T4", 0, 2),
        AttemptRow.error("T4", 1, 2),
    ]


def test_dataset_hand_computed() -> None:
    m = dataset_metrics(_rows(), k=2)
    assert m.n_tasks == 4
    assert m.n_ok == 5
    assert m.errors == 3
    assert m.atpr == pytest.approx((1 + 0 + 1 + 1 + 2 / 3) / 5)
    # covered >= 1: T1/0, T2/0, T2/1, T3/0
    assert m.alj == pytest.approx((2 + 0 + 0 + 0) / 4)
    assert m.anei == pytest.approx((2 / 3 + 1 + 1 + 0) / 4)
    assert m.amtl == pytest.approx((75 + 10 + 30 + 10) / 4)
    assert m.sr_pass1 == pytest.approx(3 / 5)
    # k = 2: T1 (n=2, c=1): pass@2 = 1, pass^2 = 0; T2 (n=2, c=2): 1, 1; T3 left out
    assert m.n_tasks_k == 2
    assert m.pass_at_k == 1.0
    assert m.pass_hat_k == 0.5
    assert m.per_task == {"T1": (2, 1), "T2": (2, 2), "T3": (1, 0)}


def test_dataset_k1() -> None:
    m = dataset_metrics(_rows(), k=1)
    # macro mean over tasks of c/n: (1/2 + 1 + 0) / 3
    assert m.n_tasks_k == 3
    assert m.pass_at_k == pytest.approx((0.5 + 1 + 0) / 3)
    assert m.pass_hat_k == m.pass_at_k


def test_dataset_no_task_qualifies_for_k() -> None:
    m = dataset_metrics(_rows(), k=3)
    assert m.n_tasks_k == 0
    assert m.pass_at_k is None and m.pass_hat_k is None
    assert m.sr_pass1 == pytest.approx(3 / 5)


def test_error_rows_left_out_of_every_score() -> None:
    base = [r for r in _rows() if r.status == "ok"]
    errors = [r for r in _rows() if r.status == "error"]
    # an error row with (nonsense) numbers must not change any score
    errors.append(AttemptRow("T1", 9, "error", 4, 4, 4, 1.0, 3, 1.0, 1e6, True))
    with_errors = dataset_metrics(base + errors, k=2)
    without = dataset_metrics(base, k=2)
    for name in ("atpr", "alj", "anei", "amtl", "sr_pass1", "pass_at_k", "pass_hat_k", "n_ok", "n_tasks_k"):
        assert getattr(with_errors, name) == getattr(without, name), name
    assert with_errors.errors == 4 and without.errors == 0
    assert with_errors.n_tasks == 4 and without.n_tasks == 3


def test_nothing_accepted_anywhere() -> None:
    rows = [_ok("T1", 0, 3, 0, 0, ()), _ok("T1", 1, 3, 0, 0, ()), _ok("T2", 0, 2, 0, 0, ())]
    m = dataset_metrics(rows, k=1)
    assert m.atpr == 0.0
    assert m.alj is None and m.anei is None and m.amtl is None
    assert m.sr_pass1 == 0.0
    assert m.pass_at_k == 0.0 and m.pass_hat_k == 0.0


def test_only_errors_and_empty() -> None:
    m = dataset_metrics([AttemptRow.error("T1", 0, 3)], k=1)
    assert (m.n_tasks, m.n_ok, m.errors) == (1, 0, 1)
    for name in ("atpr", "alj", "anei", "amtl", "sr_pass1", "pass_at_k", "pass_hat_k"):
        assert getattr(m, name) is None, name
    empty = dataset_metrics([], k=2)
    assert (empty.n_tasks, empty.n_ok, empty.errors, empty.atpr) == (0, 0, 0, None)


def test_dataset_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        dataset_metrics(_rows(), k=0)
    with pytest.raises(ValueError):
        dataset_metrics([_ok("T1", 0, 2, 1, 1, (1,)), _ok("T1", 0, 2, 2, 1, (1,))], k=1)
    bad_status = _ok("T1", 0, 2, 1, 1, (1,))
    bad_status.status = "skipped"  # type: ignore[assignment]
    with pytest.raises(ValueError):
        dataset_metrics([bad_status], k=1)
    missing = _ok("T1", 0, 2, 1, 1, (1,))
    missing.tpr = None
    with pytest.raises(ValueError):
        dataset_metrics([missing], k=1)
    nan_tpr = _ok("T1", 0, 2, 1, 1, (1,))
    nan_tpr.tpr = float("nan")
    with pytest.raises(ValueError):
        dataset_metrics([nan_tpr], k=1)


def test_nan_mtl_is_treated_as_missing() -> None:
    row = _ok("T1", 0, 2, 1, 1, (1,))
    row.mtl = float("nan")
    assert dataset_metrics([row], k=1).amtl is None


def test_summary_shape() -> None:
    s = dataset_metrics(_rows(), k=2).summary()
    assert set(s) == {"n_tasks", "atpr", "alj", "anei", "amtl", "amtl_alg1", "sr", "pass^2", "errors"}
    assert s["sr"] == {"pass@1": pytest.approx(0.6), "pass@2": 1.0}
    assert s["pass^2"] == 0.5
    assert s["errors"] == 3 and s["n_tasks"] == 4
    s1 = dataset_metrics(_rows(), k=1).summary()
    assert s1["sr"] == {"pass@1": pytest.approx(0.6)}  # the contract's mean success
    assert "pass^1" in s1


@st.composite
def _datasets(draw) -> list[AttemptRow]:
    rows: list[AttemptRow] = []
    for t in range(draw(st.integers(0, 6))):
        for a in range(draw(st.integers(0, 6))):
            if draw(st.booleans()) and draw(st.booleans()):
                rows.append(AttemptRow.error(f"T{t}", a, 3))
                continue
            k_max = draw(st.integers(1, 5))
            covered = draw(st.integers(0, k_max))
            turns = draw(st.integers(1, covered)) if covered else 0
            stl = tuple(draw(st.lists(st.integers(0, 500), min_size=turns, max_size=turns)))
            rows.append(_ok(f"T{t}", a, k_max, covered, turns, stl))
    return rows


@settings(max_examples=200)
@given(_datasets(), st.integers(1, 6))
def test_dataset_properties(rows: list[AttemptRow], k: int) -> None:
    m = dataset_metrics(rows, k)
    assert isinstance(m, DatasetMetrics)
    ok = [r for r in rows if r.status == "ok"]
    assert m.n_ok == len(ok)
    assert m.errors == len(rows) - len(ok)
    assert m.n_tasks == len({r.task_id for r in rows})
    values = [m.atpr, m.alj, m.anei, m.amtl, m.sr_pass1, m.pass_at_k, m.pass_hat_k]
    assert all(v is None or (type(v) is float and math.isfinite(v)) for v in values)
    for v in (m.atpr, m.anei, m.sr_pass1, m.pass_at_k, m.pass_hat_k):
        assert v is None or 0.0 <= v <= 1.0
    assert (m.atpr is None) == (not ok)
    assert (m.amtl is None) == (m.alj is None) == (m.anei is None)
    assert (m.pass_at_k is None) == (m.n_tasks_k == 0)
    if m.n_tasks_k:
        # per task pass^k <= c/n <= pass@k, so the same holds for the means
        # over the qualifying tasks (not against sr_pass1, a mean over rows)
        qualifying = [(n, c) for n, c in m.per_task.values() if n >= k]
        macro_p1 = sum(c / n for n, c in qualifying) / len(qualifying)
        assert m.pass_hat_k <= macro_p1 + 1e-12
        assert macro_p1 <= m.pass_at_k + 1e-12
        if k > 1:
            smaller = dataset_metrics(rows, k - 1)
            # the set of tasks can grow as k falls, so compare on the same tasks
            if smaller.n_tasks_k == m.n_tasks_k:
                assert smaller.pass_at_k <= m.pass_at_k + 1e-12
                assert smaller.pass_hat_k >= m.pass_hat_k - 1e-12


def test_mtl_alg1_counts_the_rejected_turn_and_divides_by_covered() -> None:
    # K = 5; turn 1 (100 tokens) covers 1-2, turn 2 (40) covers 3, turn 3 (60) is rejected at 4:
    # MTL = (100 + 40) / 2 = 70 (accepted turns only); Alg. 1 = (100 + 40 + 60) / 3 covered = 66.67
    m = task_metrics(WalkOutcome(checkpoints=5, covered=3, accepted_turns=2, stl_accepted=(100, 40), stl_rejected=60))
    assert m.mtl == 70.0 and m.mtl_alg1 == pytest.approx(200 / 3)
    # every checkpoint covered, nothing rejected: (30 + 50) / 4 = 20 vs MTL 40
    m = task_metrics(WalkOutcome(checkpoints=4, covered=4, accepted_turns=2, stl_accepted=(30, 50)))
    assert m.mtl == 40.0 and m.mtl_alg1 == 20.0
    # the first turn rejected: nothing covered, both undefined
    m = task_metrics(WalkOutcome(checkpoints=3, covered=0, accepted_turns=0, stl_rejected=12))
    assert m.mtl is None and m.mtl_alg1 is None
    with pytest.raises(ValueError):
        WalkOutcome(checkpoints=3, covered=0, accepted_turns=0, stl_rejected=-1)


def test_amtl_alg1_is_the_mean_over_rows_that_have_one_and_old_rows_count_as_missing() -> None:
    rows = [
        AttemptRow("a", 0, "ok", 2, 4, 1, 0.5, 1, 1.0, 10.0, False, mtl_alg1=9.0),
        AttemptRow("b", 0, "ok", 3, 3, 3, 1.0, 0, 0.0, 20.0, True, mtl_alg1=20.0),
        AttemptRow("c", 0, "ok", 1, 2, 1, 0.5, 0, 1.0, 7.0, False),  # a run written before mtl_alg1
        AttemptRow("d", 0, "ok", 0, 2, 0, 0.0, 0, 0.0, None, False, mtl_alg1=None),
    ]
    s = dataset_metrics(rows, k=1).summary()
    assert s["amtl_alg1"] == pytest.approx(14.5) and s["amtl"] == pytest.approx(37 / 3)
