"""Whether the runs of one report can be compared: the settings that must be
equal across them (judge and fluency model, their prompt hashes and input
limits, K, the dataset, the agent's prompt, the Cirrus version) and the
self-judged runs, as warnings (:func:`comparability_warnings`).  Read by the
walk report (:mod:`cirrus.report.command`) and the subtask report
(:mod:`cirrus.report.subtask`); each run is a
:class:`~cirrus.report.loading.Run` or a
:class:`~cirrus.report.subtask.SubtaskRun` (``run_id``, ``model``, ``k``,
``dataset``, ``summary``, ``config``, ``self_judged``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["GATE_SETTINGS", "comparability_warnings", "differing_settings"]


def _fingerprint(run: Any) -> dict[str, Any]:
    value = run.config.get("fingerprint")
    return value if isinstance(value, dict) else {}


def _role_hash(run: Any, role: str, key: str = "prompt_sha256") -> str | None:
    """``key`` (``prompt_sha256``) of a role's fingerprint in run.json, when
    recorded; a dict value (``input_limits``) as canonical JSON."""
    part = _fingerprint(run).get(role)
    value = part.get(key) if isinstance(part, dict) else None
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return None if value is None else str(value)


# what must be equal for runs to be compared: (what, value of a run or None
# when unknown, whether a run that did not record it is left out of the check)
_COMPARED: tuple[tuple[str, Any, bool], ...] = (
    ("judge model", lambda run: run.summary.get("judge") or _fingerprint(run).get("judge"), False),
    ("fluency model", lambda run: run.summary.get("fluency") or _fingerprint(run).get("fluency"), False),
    ("judge prompt hash", lambda run: _role_hash(run, "judge_role"), True),
    ("judge logical-jump prompt hash", lambda run: _role_hash(run, "judge_role", "later_prompt_sha256"), True),
    ("judge input limits", lambda run: _role_hash(run, "judge_role", "input_limits"), True),
    ("fluency prompt hash", lambda run: _role_hash(run, "fluency_role"), True),
    ("fluency input limits", lambda run: _role_hash(run, "fluency_role", "input_limits"), True),
    ("K (--pass-k)", lambda run: run.k, False),
    ("dataset hash", lambda run: run.dataset, False),
    ("agent prompt hash", lambda run: _role_hash(run, "agent_role"), True),
    ("agent configuration ([agent] of cirrus.toml or --agent-config)",
     lambda run: _fingerprint(run).get("agent_config") or "none", False),
    ("Cirrus version", lambda run: run.summary.get("cirrus_version") or _fingerprint(run).get("cirrus"), False),
)


def comparability_warnings(runs: Sequence[Any], k: int | None = None) -> list[str]:
    """Why the runs of one report may not be comparable: one warning per
    setting that differs across runs (judge and fluency model, their prompt
    hashes where run.json records them, K, dataset hash, agent prompt hash,
    Cirrus version), naming the value of every run; and one per self-judged
    run (also for a single run).  ``k``: the report's ``--k``, if given."""
    warnings: list[str] = []
    if len(runs) > 1:
        for what, get, skip_unrecorded in _COMPARED:
            values = {run.run_id: get(run) for run in runs}
            if skip_unrecorded:
                values = {r: v for r, v in values.items() if v is not None}
            if len(values) < 2 or len({str(v) for v in values.values()}) < 2:
                continue
            shown = ", ".join(f"{r}: {'unknown' if v is None else (str(v)[:12] if 'hash' in what or 'config' in what else v)}"
                              for r, v in values.items())
            text = f"the runs differ in {what} ({shown}): their scores are not directly comparable"
            if what.startswith("agent"):
                text = (f"the runs differ in {what} ({shown}): they evaluate different agent setups, so the scores "
                        f"compare the setups (as intended when comparing agent versions), not the models alone")
            if what.startswith("K"):
                text += (f"; pass@K and pass^K are computed with K={k} for every run (--k)" if k is not None else
                         "; pass@K and pass^K are each run's own K, labelled per run (use --k N for one K)")
            elif what == "dataset hash":
                text += "; paired comparisons use the tasks they have in common"
            warnings.append(text)
    for run in runs:
        if run.self_judged:
            warnings.append(f"run {run.run_id!r} is self-judged: its judge or fluency checker is the agent's own "
                            f"model ({run.model}), so it grades itself; rerun it with a fixed --judge-model to "
                            "compare it fairly")
    return warnings


# what must be equal for `cirrus gate` to compare two runs at all: the judge
# (and the fluency checker, which also ends walks), K and the tasks
GATE_SETTINGS = ("judge model", "judge prompt hash", "judge logical-jump prompt hash", "judge input limits",
                 "fluency model", "fluency prompt hash", "fluency input limits", "K (--pass-k)", "dataset hash")


def differing_settings(runs: Sequence[Any], settings: Sequence[str] = GATE_SETTINGS) -> list[str]:
    """The ``settings`` (names of the comparability checks above) that
    differ across ``runs``, each as ``what (run: value, ...)``; a setting a
    run did not record counts as ``unknown`` unless the check leaves such
    runs out (prompt hashes, input limits)."""
    known = {what: (get, skip) for what, get, skip in _COMPARED}
    unknown = [what for what in settings if what not in known]
    if unknown:
        raise ValueError(f"unknown settings {unknown!r}; known: {', '.join(known)}")
    found = []
    for what in settings:
        get, skip_unrecorded = known[what]
        values = {run.run_id: get(run) for run in runs}
        if skip_unrecorded:
            values = {r: v for r, v in values.items() if v is not None}
        if len(values) < 2 or len({str(v) for v in values.values()}) < 2:
            continue
        shown = ", ".join(f"{r}: {'unknown' if v is None else (str(v)[:12] if 'hash' in what else v)}"
                          for r, v in values.items())
        found.append(f"{what} ({shown})")
    return found
