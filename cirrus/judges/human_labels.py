"""Human labels that calibrate the judge (issue 27 item 2, docs/human-labels.md).

A person looks at one coverage verdict of a run (``accepts k?``: the judge
said Included or Not Included about the agent's reply at checkpoint ``k``)
and says whether it was right; when it was wrong, the right verdict is the
other one (it may be given explicitly, and a note may be added).  Labels
come from the viewer (``cirrus view``: a form under each verdict) or from a
spreadsheet (``cirrus annotate export`` / ``import``: CSV), and are read by
``cirrus judge-eval --human RUN`` and ``cirrus report``.

What is labelled, :class:`JudgedItem`: one coverage verdict the judge gave
(a verdict with no judge answer, a tool-calls-only turn, is not labelled),
keyed by ``(run_id, task_id, attempt, turn, checkpoint)`` where ``turn`` is
the checkpoint the turn answered and ``checkpoint`` the one judged (they
differ for a logical jump's later checkpoints).

Stored, :class:`HumanLabel`: one JSON line per label, appended to
``<workspace>/labels/human.jsonl`` (:data:`LABELS_FILE`) under a file lock,
each line written with one ``os.write`` and fsynced
(:func:`cirrus.files.append_line`); never rewritten.  The latest line for
the same item wins.  Every label holds the judge's verdict it was given on,
the run's judge prompt hash and the SHA-256 of the reply judged
(:func:`reply_hash`), so a label is only used while the run still holds that
very reply: a label whose reply hash no longer matches the run (a run made
again under the same id) is refused on import and left out, counted, by
``judge-eval``.

The metrics are :func:`cirrus.judges.calibration.judge_metrics` with the
person's verdict as the truth and the judge's as the prediction: accuracy
with its Wilson interval, Cohen's kappa (scikit-learn), the confusion
matrix; overall and per language (:func:`human_metrics`).
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from cirrus.files import append_line, atomic_writer, read_jsonl
from cirrus.judges.calibration import INCLUDED, NOT_INCLUDED, JudgeMetrics, judge_metrics, parse_label

__all__ = ["CSV_COLUMNS", "LABELS_FILE", "CurrentLabels", "HumanLabel", "HumanLabelError", "ImportResult", "JudgedItem",
           "append_label", "append_labels", "current_labels", "export_csv", "human_check", "human_metrics", "import_csv",
           "human_check_line", "judge_prompt_hash", "judged_items", "latest_labels", "make_label", "read_labels",
           "reply_hash", "sample", "write_csv"]

LABELS_FILE = Path("labels/human.jsonl")
RIGHT, WRONG = "right", "wrong"
MAX_NOTE = 2000  # characters of a note

# the CSV a labeller fills in: the item, its texts, and three columns to fill
# (human: right/wrong; correct_verdict: optional; note: optional)
CSV_COLUMNS = ("run_id", "task_id", "attempt", "turn", "checkpoint", "language", "judge_verdict", "human",
               "correct_verdict", "note", "query", "reply", "reference", "judge_raw", "reply_sha256",
               "judge_prompt_hash")
_KEY_COLUMNS = ("run_id", "task_id", "attempt", "turn", "checkpoint")
_TEXT_COLUMNS = ("query", "reply", "reference", "judge_raw", "note")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class HumanLabelError(ValueError):
    """A label, a run or a label file that cannot be used; the message says why."""


def _verdict_name(value: bool) -> str:
    return INCLUDED if value else NOT_INCLUDED


def reply_hash(reply: str) -> str:
    """SHA-256 (hex) of the reply judged, the agent's text as the transcript holds it."""
    return hashlib.sha256(reply.encode("utf-8")).hexdigest()


def judge_prompt_hash(run: Mapping[str, Any]) -> str | None:
    """The judge's ``prompt_sha256`` from a run's ``run.json`` (a panel: its
    members' distinct hashes joined by ``,``); None when the run does not
    record one (the offline heuristic has no prompt)."""
    fingerprint = run.get("fingerprint") if isinstance(run.get("fingerprint"), dict) else {}
    role = fingerprint.get("judge_role") if isinstance(fingerprint, dict) else None
    if not isinstance(role, dict):
        return None
    if isinstance(role.get("panel"), list):
        hashes = [m.get("prompt_sha256") for m in role["panel"] if isinstance(m, dict) and m.get("prompt_sha256")]
        return ",".join(dict.fromkeys(str(h) for h in hashes)) or None
    value = role.get("prompt_sha256")
    return str(value) if value else None


# ---------------------------------------------------------------------------
# what can be labelled


Key = tuple[str, str, int, int, int]  # run_id, task_id, attempt, turn, checkpoint


@dataclass(frozen=True, slots=True)
class JudgedItem:
    """One coverage verdict of a run that a person can label."""

    run_id: str
    task_id: str
    attempt: int
    turn: int  # the checkpoint the turn answered
    checkpoint: int  # the checkpoint judged (later than ``turn`` for a logical jump)
    language: str
    verdict: bool  # the judge's: True for Included
    raw: str
    query: str
    reply: str
    reference: str
    judge_prompt_hash: str | None

    @property
    def key(self) -> Key:
        return (self.run_id, self.task_id, self.attempt, self.turn, self.checkpoint)

    @property
    def reply_sha256(self) -> str:
        return reply_hash(self.reply)


def judged_items(workspace: Path, run_id: str) -> list[JudgedItem]:
    """Every coverage verdict of run ``run_id`` that the judge gave (a
    verdict with a judge answer), in task, attempt and turn order.  A
    :class:`HumanLabelError` for an unknown run or a subtask run."""
    from cirrus.report.run_view import RUN_FILE, ShowError, load_run_view

    try:
        view = load_run_view(workspace, run_id)
    except ShowError as exc:
        raise HumanLabelError(str(exc)) from None
    try:
        run = json.loads((view.directory / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        run = {}
    prompt_hash = judge_prompt_hash(run if isinstance(run, dict) else {})
    items = []
    for key in sorted(view.rows):
        row = view.rows[key]
        transcript = view.transcripts.get(key)
        if row.get("status") != "ok" or not transcript:
            continue
        for turn in transcript.get("turns") or []:
            for verdict in turn.get("verdicts") or []:
                if verdict.get("kind") != "coverage" or verdict.get("raw") is None or \
                        not isinstance(verdict.get("ok"), bool) or not isinstance(verdict.get("checkpoint"), int):
                    continue
                items.append(JudgedItem(
                    run_id, str(row["task_id"]), int(row["attempt"]), int(turn.get("checkpoint") or 0),
                    int(verdict["checkpoint"]), str(row.get("language") or "unknown"), verdict["ok"],
                    str(verdict.get("raw") or ""), str(turn.get("query") or ""), str(turn.get("agent_text") or ""),
                    str(turn.get("reference") or ""), prompt_hash))
    return items


# ---------------------------------------------------------------------------
# labels


@dataclass(frozen=True, slots=True)
class HumanLabel:
    """A person's label of one judged item, as stored (one JSON line)."""

    run_id: str
    task_id: str
    attempt: int
    turn: int
    checkpoint: int
    judge_verdict: str  # Included / Not Included: what the judge said
    human: str  # right / wrong
    correct_verdict: str  # what the person says is right (the judge's when right)
    note: str
    judge_prompt_hash: str | None
    reply_sha256: str
    language: str
    created_at: str
    source: str  # view / csv / api

    @property
    def key(self) -> Key:
        return (self.run_id, self.task_id, self.attempt, self.turn, self.checkpoint)

    @property
    def truth(self) -> bool:
        return self.correct_verdict == INCLUDED

    @property
    def predicted(self) -> bool:
        return self.judge_verdict == INCLUDED

    def record(self) -> dict[str, Any]:
        return asdict(self)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _parse_human(value: Any) -> bool | None:
    text = str(value or "").strip().lower()
    return {"right": True, "correct": True, "yes": True, "wrong": False, "incorrect": False,
            "no": False}.get(text)


def make_label(item: JudgedItem, human: str | bool, correct_verdict: str | None = None, note: str = "", *,
               source: str = "api", reply_sha256: str | None = None, created_at: str | None = None) -> HumanLabel:
    """The label of ``item``: ``human`` right / wrong (or a bool: right);
    ``correct_verdict`` Included / Not Included, optional (wrong: the other
    verdict; right: the judge's); ``reply_sha256``: the reply hash the person
    was shown, refused when the run no longer holds that reply."""
    right = human if isinstance(human, bool) else _parse_human(human)
    if right is None:
        raise HumanLabelError(f"the label must be {RIGHT!r} or {WRONG!r}, not {human!r}")
    if reply_sha256 is not None and reply_sha256.strip() and reply_sha256.strip() != item.reply_sha256:
        raise HumanLabelError(f"the reply of {_where(item.key)} is no longer the one labelled (its reply hash "
                              "differs: the run was made again): label it anew")
    correct = item.verdict if right else not item.verdict
    if correct_verdict is not None and str(correct_verdict).strip():
        given = parse_label(str(correct_verdict))
        if given is None:
            raise HumanLabelError(f"correct_verdict must be {INCLUDED!r} or {NOT_INCLUDED!r} (or empty), "
                                  f"not {correct_verdict!r}")
        if given != correct:
            said = "right" if right else "wrong"
            raise HumanLabelError(f"the judge said {_verdict_name(item.verdict)} and the label says it was {said}, "
                                  f"but correct_verdict is {_verdict_name(given)}")
    note = str(note or "").strip()
    if len(note) > MAX_NOTE:
        raise HumanLabelError(f"the note is {len(note)} characters long; at most {MAX_NOTE}")
    return HumanLabel(item.run_id, item.task_id, item.attempt, item.turn, item.checkpoint,
                      _verdict_name(item.verdict), RIGHT if right else WRONG, _verdict_name(correct), note,
                      item.judge_prompt_hash, item.reply_sha256, item.language, created_at or _now(), source)


def _where(key: Key) -> str:
    run_id, task_id, attempt, turn, checkpoint = key
    judged = f"checkpoint {checkpoint}" if turn == checkpoint else f"checkpoint {checkpoint} (turn {turn})"
    return f"run {run_id}, task {task_id}, attempt {attempt}, {judged}"


def append_label(workspace: Path, label: HumanLabel) -> None:
    """Append ``label`` to ``workspace/labels/human.jsonl`` (the folder made
    when missing), one fsynced line, under an exclusive lock of the file."""
    append_labels(workspace, [label])


def append_labels(workspace: Path, labels: Sequence[HumanLabel]) -> None:
    path = workspace / LABELS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(label.record(), ensure_ascii=False) + "\n" for label in labels]
    if not lines:
        return
    with open(path.with_name(path.name + ".lock"), "a+b") as lock:
        try:
            import fcntl

            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - Windows: append_line's O_APPEND alone
            pass
        for line in lines:
            append_line(path, line, sync=line is lines[-1])


def _label_of(record: Mapping[str, Any]) -> HumanLabel | None:
    try:
        label = HumanLabel(**{f.name: record[f.name] for f in fields(HumanLabel)})
    except (KeyError, TypeError):
        return None
    if label.human not in (RIGHT, WRONG) or label.correct_verdict not in (INCLUDED, NOT_INCLUDED) \
            or label.judge_verdict not in (INCLUDED, NOT_INCLUDED):
        return None
    return label


def read_labels(workspace: Path, run_id: str | None = None) -> list[HumanLabel]:
    """Every stored label (of ``run_id`` only, when given), in the order written;
    a line that is not a label is skipped."""
    labels = []
    for record in read_jsonl(workspace / LABELS_FILE):
        label = _label_of(record) if isinstance(record, dict) else None
        if label is not None and (run_id is None or label.run_id == run_id):
            labels.append(label)
    return labels


def latest_labels(labels: Iterable[HumanLabel]) -> dict[Key, HumanLabel]:
    """The latest label of each item (the one written last)."""
    latest: dict[Key, HumanLabel] = {}
    for label in labels:
        latest[label.key] = label
    return latest


@dataclass(frozen=True, slots=True)
class CurrentLabels:
    """The labels of a run that still apply, and those that no longer do."""

    labels: list[HumanLabel]  # the latest label of each item the run still holds, reply unchanged
    stale: list[HumanLabel]  # the reply hash differs, or the item is gone from the run


def current_labels(workspace: Path, run_id: str, items: Sequence[JudgedItem] | None = None) -> CurrentLabels:
    """The latest label of each item of ``run_id``, checked against the run
    as it is now (:func:`judged_items`): a label whose item is gone or whose
    reply hash differs is stale."""
    items = judged_items(workspace, run_id) if items is None else items
    by_key = {item.key: item for item in items}
    fresh, stale = [], []
    for key, label in latest_labels(read_labels(workspace, run_id)).items():
        item = by_key.get(key)
        if item is None or item.reply_sha256 != label.reply_sha256 \
                or _verdict_name(item.verdict) != label.judge_verdict:
            stale.append(label)
        else:
            fresh.append(label)
    return CurrentLabels(fresh, stale)


# ---------------------------------------------------------------------------
# a sample to label


def sample(items: Sequence[JudgedItem], n: int, seed: int = 0) -> list[JudgedItem]:
    """``n`` items (all when there are fewer), stratified by the judge's
    verdict and the language: every stratum gets its share of ``n`` in
    proportion to its size (largest remainders first), and at least one item
    when ``n`` reaches the number of strata, so a rare language or verdict is
    never left out.  The same items and seed give the same sample, in the
    order of ``items``."""
    if n < 1:
        raise HumanLabelError(f"n must be at least 1, not {n}")
    if n >= len(items):
        return list(items)
    strata: dict[tuple[bool, str], list[int]] = {}
    for index, item in enumerate(items):
        strata.setdefault((item.verdict, item.language), []).append(index)
    names = sorted(strata, key=lambda s: (s[1], not s[0]))
    total = len(items)
    quota = {s: 0 for s in names}
    if n >= len(names):
        for s in names:
            quota[s] = 1
    left = n - sum(quota.values())
    exact = {s: left * len(strata[s]) / total for s in names}
    room = {s: len(strata[s]) - quota[s] for s in names}
    for s in names:
        quota[s] += min(room[s], int(exact[s]))
    left = n - sum(quota.values())
    while left > 0:  # the largest remainders (ties: the bigger stratum, then the name) take the rest
        order = sorted((s for s in names if quota[s] < len(strata[s])),
                       key=lambda s: (-(exact[s] - int(exact[s])), -len(strata[s]), names.index(s)))
        for s in order[:left]:
            quota[s] += 1
        left = n - sum(quota.values())
    rng = random.Random(seed)
    chosen = [i for s in names for i in sorted(rng.sample(strata[s], quota[s]))]
    return [items[i] for i in sorted(chosen)]


# ---------------------------------------------------------------------------
# CSV


def _cell(value: Any) -> str:
    """A text as a spreadsheet shows it, never as a formula (a leading ``'``
    before ``= + - @``, tab or CR; import ignores the texts)."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def write_csv(path: Path, items: Sequence[JudgedItem], labels: Mapping[Key, HumanLabel] | None = None) -> Path:
    """Write ``items`` as a CSV to label (UTF-8 with a BOM, for spreadsheets),
    with each item's current label filled in from ``labels``."""
    labels = labels or {}
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_writer(path) as handle:
        handle.write("\ufeff")
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for item in items:
            label = labels.get(item.key)
            writer.writerow({
                "run_id": item.run_id, "task_id": item.task_id, "attempt": item.attempt, "turn": item.turn,
                "checkpoint": item.checkpoint, "language": item.language,
                "judge_verdict": _verdict_name(item.verdict),
                "human": label.human if label else "",
                "correct_verdict": label.correct_verdict if label and label.human == WRONG else "",
                "note": _cell(label.note if label else ""), "query": _cell(item.query), "reply": _cell(item.reply),
                "reference": _cell(item.reference), "judge_raw": _cell(item.raw),
                "reply_sha256": item.reply_sha256, "judge_prompt_hash": item.judge_prompt_hash or ""})
    return path


def export_csv(workspace: Path, run_id: str, path: Path) -> int:
    """Every judged item of ``run_id`` with its current label, as a CSV at ``path``; the rows written."""
    items = judged_items(workspace, run_id)
    write_csv(path, items, {label.key: label for label in current_labels(workspace, run_id, items).labels})
    return len(items)


@dataclass
class ImportResult:
    imported: list[HumanLabel]
    unlabelled: int  # rows with an empty ``human`` column: skipped, no problem
    problems: list[str]  # ``FILE:LINE: reason``, one per refused row


def _int(value: str, name: str) -> int:
    text = (value or "").strip()
    if not text.lstrip("-").isdigit():
        raise HumanLabelError(f"{name} must be a whole number, not {value!r}")
    return int(text)


def _uncell(value: str | None) -> str:
    text = value or ""
    return text[1:] if text.startswith("'") and text[1:].startswith(_FORMULA_START) else text


def import_csv(workspace: Path, path: Path, *, write: bool = True) -> ImportResult:
    """Read the labels of a CSV (:data:`CSV_COLUMNS`; the texts are not
    needed) and append those that are valid: each row is checked against
    its run as it is now; a bad row is named by file, line and reason and
    the others are imported.  Rows with no ``human`` value are skipped."""
    if not path.is_file():
        raise HumanLabelError(f"{path} does not exist or is not a file")
    items: dict[str, dict[Key, JudgedItem] | str] = {}
    imported: list[HumanLabel] = []
    problems: list[str] = []
    unlabelled = 0
    try:
        handle = path.open(encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise HumanLabelError(f"{path}: {exc.strerror or exc}") from None
    with handle:
        reader = csv.DictReader(handle)
        missing = [c for c in (*_KEY_COLUMNS, "human") if c not in (reader.fieldnames or [])]
        if missing:
            raise HumanLabelError(f"{path}:1: the header lacks {', '.join(missing)} "
                                  f"(export one with `cirrus annotate export RUN --out FILE.csv`)")
        previous = reader.line_num  # the header's last line
        for number, row in enumerate(reader, 1):
            line, previous = previous + 1, reader.line_num  # where the row starts (a text may span lines)
            if not any((v or "").strip() for k, v in row.items() if k is not None):
                continue
            if not (row.get("human") or "").strip():
                unlabelled += 1
                continue
            try:
                run_id = (row.get("run_id") or "").strip()
                if run_id not in items:
                    try:
                        items[run_id] = {item.key: item for item in judged_items(workspace, run_id)}
                    except HumanLabelError as exc:
                        items[run_id] = str(exc)
                run_items = items[run_id]
                if isinstance(run_items, str):
                    raise HumanLabelError(run_items)
                key = (run_id, (row.get("task_id") or "").strip(), _int(row.get("attempt", ""), "attempt"),
                       _int(row.get("turn", ""), "turn"), _int(row.get("checkpoint", ""), "checkpoint"))
                item = run_items.get(key)
                if item is None:
                    raise HumanLabelError(f"run {run_id} has no judged verdict for task {key[1]!r}, attempt "
                                          f"{key[2]}, turn {key[3]}, checkpoint {key[4]}")
                given_verdict = (row.get("judge_verdict") or "").strip()
                if given_verdict and parse_label(given_verdict) != item.verdict:
                    raise HumanLabelError(f"judge_verdict is {given_verdict!r} but the run's judge said "
                                          f"{_verdict_name(item.verdict)} (the run was made again?)")
                digest = (row.get("reply_sha256") or "").strip()
                if not digest:
                    raise HumanLabelError("reply_sha256 is empty: it ties the label to the reply that was read")
                label = make_label(item, row.get("human") or "", row.get("correct_verdict"),
                                   _uncell(row.get("note")), source="csv", reply_sha256=digest)
            except HumanLabelError as exc:
                problems.append(f"{path}:{line}: row {number}: {exc}")
                continue
            imported.append(label)
    if write:
        append_labels(workspace, imported)
    return ImportResult(imported, unlabelled, problems)


# ---------------------------------------------------------------------------
# the judge against people


def human_metrics(labels: Sequence[HumanLabel]) -> dict[str, Any]:
    """``{"overall": JudgeMetrics, "by_language": {language: JudgeMetrics}}``
    of the judge's verdicts against the people's (the truth)."""
    def metrics(subset: Sequence[HumanLabel]) -> JudgeMetrics:
        return judge_metrics([label.truth for label in subset], [label.predicted for label in subset])

    languages = sorted({label.language for label in labels})
    return {"overall": metrics(labels),
            "by_language": {lang: metrics([lab for lab in labels if lab.language == lang]) for lang in languages}}


def human_check(workspace: Path, run_id: str) -> dict[str, Any]:
    """Whether run ``run_id``'s judge was checked against people, for the
    report: ``{"labels": n, "accuracy": a, "accuracy_ci95": [lo, hi],
    "kappa": k, "stale": s}`` (``labels`` 0 and the rest None: never)."""
    try:
        current = current_labels(workspace, run_id)
    except HumanLabelError:
        return {"labels": 0, "accuracy": None, "accuracy_ci95": None, "kappa": None, "stale": 0}
    if not current.labels:
        return {"labels": 0, "accuracy": None, "accuracy_ci95": None, "kappa": None, "stale": len(current.stale)}
    overall: JudgeMetrics = human_metrics(current.labels)["overall"]
    return {"labels": overall.n, "accuracy": overall.accuracy,
            "accuracy_ci95": list(overall.accuracy_ci95) if overall.accuracy_ci95 else None,
            "kappa": overall.kappa, "stale": len(current.stale)}


def human_check_line(run_id: str, check: Mapping[str, Any]) -> str:
    """One line of :func:`human_check` for the terminal and the page."""
    stale = f" ({check['stale']} stale labels left out)" if check.get("stale") else ""
    if not check.get("labels"):
        return (f"run {run_id}: the judge was never checked against people{stale} "
                f"(label verdicts with `cirrus view` or `cirrus annotate`)")
    ci = check.get("accuracy_ci95")
    interval = f", 95% CI {ci[0]:.2f}-{ci[1]:.2f}" if ci else ""
    return (f"run {run_id}: the judge was checked against people on {check['labels']} labels: accuracy "
            f"{check['accuracy']:.2f}{interval}{stale}")
