"""How much the members of a judge panel agree (:mod:`cirrus.judges.panel`).

Pure functions over a table of votes: one row per question the panel was
asked, one boolean per member (True: Included).  Reported:

* ``unanimous``: the share of questions every member answered alike;
* per pair of members, the share of questions they answered alike and
  Cohen's kappa (scikit-learn's ``cohen_kappa_score``): agreement beyond what
  two judges with these rates of Included would reach by chance;
* Krippendorff's alpha over all members (the ``krippendorff`` package,
  nominal level): the same idea for any number of judges.

Kappa and alpha are ``None`` (never NaN) where they are undefined: no
question, or every vote of the same value (chance explains all agreement).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from itertools import combinations
from typing import Any


def _all_one_value(*columns: Sequence[bool]) -> bool:
    return len({bool(v) for column in columns for v in column}) < 2


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """Cohen's kappa of two raters' boolean votes on the same questions."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} votes against {len(b)}")
    if not a or _all_one_value(a, b):
        return None
    from sklearn.metrics import cohen_kappa_score

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = float(cohen_kappa_score([bool(v) for v in a], [bool(v) for v in b], labels=[False, True]))
    return None if value != value else value  # NaN: undefined


def krippendorff_alpha(votes: Sequence[Sequence[bool]]) -> float | None:
    """Krippendorff's alpha (nominal) of ``votes``: one row per question, one
    column per rater."""
    if not votes or _all_one_value(*votes):
        return None
    import krippendorff
    import numpy as np

    matrix = np.array([[float(bool(v)) for v in row] for row in votes]).T  # raters x questions
    if matrix.shape[0] < 2:
        return None
    value = float(krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal"))
    return None if value != value else value


def panel_agreement(members: Sequence[str], votes: Sequence[Sequence[bool]]) -> dict[str, Any]:
    """Every agreement figure of a panel (see the module doc) as a JSON-ready
    dict: ``members``, ``questions``, ``unanimous``, ``pairwise`` (``a``,
    ``b``, ``agreement``, ``cohen_kappa``), ``krippendorff_alpha``, and
    ``included_rate`` per member."""
    width = len(members)
    for number, row in enumerate(votes):
        if len(row) != width:
            raise ValueError(f"question {number} has {len(row)} votes for {width} members")
    n = len(votes)
    columns = [[bool(row[i]) for row in votes] for i in range(width)]
    pairwise = []
    for i, j in combinations(range(width), 2):
        same = sum(x == y for x, y in zip(columns[i], columns[j]))
        pairwise.append({"a": members[i], "b": members[j], "agreement": same / n if n else None,
                         "cohen_kappa": cohen_kappa(columns[i], columns[j])})
    unanimous = sum(len(set(map(bool, row))) == 1 for row in votes)
    return {
        "members": list(members),
        "questions": n,
        "unanimous": unanimous / n if n else None,
        "included_rate": {name: (sum(column) / n if n else None) for name, column in zip(members, columns)},
        "pairwise": pairwise,
        "krippendorff_alpha": krippendorff_alpha(votes),
    }


def judge_votes(verdicts: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Each judge panel member's coverage verdict on a turn, ``{"checkpoint",
    "judge", "ok"}`` per member and checkpoint asked; ``None`` for a single
    judge."""
    votes = [{"checkpoint": verdict["checkpoint"], "judge": vote["judge"], "ok": vote["ok"]}
             for verdict in verdicts if verdict.get("kind") == "coverage" for vote in verdict.get("votes") or ()]
    return votes or None


def votes_of_rows(rows: Sequence[dict[str, Any]], members: Sequence[str]) -> list[list[bool]]:
    """The vote table of a run's attempt rows (``turns[].judge_votes``): one
    row per coverage question the whole panel answered, members in
    ``members`` order; questions missing a member's vote are left out."""
    table: list[list[bool]] = []
    for row in rows:
        for turn in row.get("turns") or ():
            by_question: dict[int, dict[str, bool]] = {}
            for vote in turn.get("judge_votes") or ():
                by_question.setdefault(vote["checkpoint"], {})[vote["judge"]] = bool(vote["ok"])
            for answers in by_question.values():
                if all(name in answers for name in members):
                    table.append([answers[name] for name in members])
    return table


def _figure(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def describe_agreement(info: dict[str, Any]) -> list[str]:
    """Lines for the terminal from :func:`panel_agreement`'s dict."""
    n = info["questions"]
    if not n:
        return ["judge panel: no question was answered by every member, so no agreement figure"]
    lines = [f"judge panel of {len(info['members'])}: {n} questions, unanimous on {_figure(info['unanimous'])}, "
             f"Krippendorff's alpha {_figure(info['krippendorff_alpha'])}"]
    lines += [f"  {pair['a']} vs {pair['b']}: agree on {_figure(pair['agreement'])}, "
              f"Cohen's kappa {_figure(pair['cohen_kappa'])}" for pair in info["pairwise"]]
    return lines
