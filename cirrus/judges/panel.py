"""A panel of coverage judges: ``--judge-model A --judge-model B --judge-model C``
(or ``--judge-model A,B,C``, or ``model = ["A", "B", "C"]`` under
``[roles.judge]`` in ``cirrus.toml``).

Every question is put to every member at once; the panel's verdict is the
strict majority: Included when more than half of the members say Included.
A tie (an even panel split in two) is therefore Not Included: the agent must
convince a majority, never half of the judges.  Each member's verdict and raw
answer travel with the panel's (:attr:`Verdict.votes`), so the transcript and
``checkpoints.parquet`` hold them all and the run can report how much the
members agree (:mod:`cirrus.judges.agreement`).

When the panel says Not Included, its ``problem`` (docs/failures.md) is the
one most of the members that said Not Included name (:func:`majority_problem`):
``contradiction`` or ``missing``; a tie between them is ``missing`` (the
weaker claim, and the default); members that name none do not count, and
when none names one the panel names none.  ``missing`` is the words of the
first member (in panel order) that named the panel's problem.

A member that fails (its endpoint errors after retries, or its answer cannot
be read) fails the question: the attempt becomes an infrastructure error, as
with a single judge, and is tried again when the run is resumed.  A majority
of the members that happened to answer would be a different panel on every
question.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from cirrus.evaluate.types import CoverageJudge, InfrastructureError, Verdict

TIE_RULE = "strict majority; a tie is Not Included"


def majority(votes: Sequence[bool]) -> bool:
    """The panel's verdict: more than half of ``votes`` are Included."""
    if not votes:
        raise ValueError("a panel verdict needs at least one vote")
    return 2 * sum(map(bool, votes)) > len(votes)


def majority_problem(verdicts: Sequence[Verdict]) -> tuple[str | None, str | None]:
    """``(problem, missing)`` of a Not Included panel (see the module doc)."""
    named = [v for v in verdicts if not v.ok and v.problem in ("missing", "contradiction")]
    if not named:
        return None, None
    contradictions = sum(v.problem == "contradiction" for v in named)
    problem = "contradiction" if 2 * contradictions > len(named) else "missing"
    missing = next((v.missing for v in named if v.problem == problem and v.missing), None)
    return problem, missing


def _fingerprint(judge: Any) -> Any:
    return judge.fingerprint() if hasattr(judge, "fingerprint") else {"name": judge.name}


class JudgePanel:
    """Coverage judges that decide together (see the module doc)."""

    def __init__(self, members: Sequence[CoverageJudge]) -> None:
        if len(members) < 2:
            raise ValueError("a judge panel needs at least two members")
        names = [member.name for member in members]
        if len(set(names)) != len(names):
            raise ValueError(f"a judge panel lists the same judge twice: {', '.join(names)}")
        self.members = tuple(members)
        self.name = "panel(" + ", ".join(names) + ")"

    @property
    def member_names(self) -> list[str]:
        return [member.name for member in self.members]

    def fingerprint(self) -> dict[str, Any]:
        return {"panel": [_fingerprint(member) for member in self.members], "rule": TIE_RULE}

    async def covers(self, history: list[dict[str, Any]], query: str, reference: str, candidate: str) -> Verdict:
        return await self._ask(lambda member: member.covers(history, query, reference, candidate))

    async def covers_later(self, history: list[dict[str, Any]], query: str, candidate: str, later_query: str,
                           later_reference: str) -> Verdict:
        def ask(member: CoverageJudge) -> Awaitable[Verdict]:
            later = getattr(member, "covers_later", None)
            if later is None:  # as cirrus.evaluate.walk.ask_coverage does for a single judge
                return member.covers(history, later_query, later_reference, candidate)
            return later(history, query, candidate, later_query, later_reference)

        return await self._ask(ask)

    async def _ask(self, ask: Callable[[CoverageJudge], Awaitable[Verdict]]) -> Verdict:
        answers = await asyncio.gather(*(ask(member) for member in self.members), return_exceptions=True)
        for member, answer in zip(self.members, answers):
            if isinstance(answer, BaseException):
                if isinstance(answer, InfrastructureError):
                    raise InfrastructureError(f"judge panel member {member.name}: {answer}") from answer
                raise answer
        verdicts: list[Verdict] = list(answers)  # type: ignore[arg-type]
        ok = majority([v.ok for v in verdicts])
        yes = sum(v.ok for v in verdicts)
        raw = (f"{'Included' if ok else 'Not Included'} (panel: {yes} of {len(verdicts)} members say Included; "
               f"{TIE_RULE})")
        votes = tuple({"judge": member.name, "ok": verdict.ok, "raw": verdict.raw}
                      for member, verdict in zip(self.members, verdicts))
        cut = next((v.input_cut for v in verdicts if v.input_cut), None)
        problem, missing = (None, None) if ok else majority_problem(verdicts)
        return Verdict(ok=ok, raw=raw, input_cut=cut, votes=votes, problem=problem, missing=missing)
