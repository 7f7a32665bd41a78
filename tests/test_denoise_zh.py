"""Chinese denoising: the ``[languages.zh.denoise]`` rules and the Chinese
reading of a message in :class:`cirrus.ingest.denoise.Denoiser`.

``tests/data/filler_zh.jsonl`` holds labelled customer and agent messages
(``filler`` true: a greeting, holding message, ping, acknowledgement,
thanks, sign-off, "anything else?" or rating prompt; false: it carries
information).  The rules must get almost all of them right and must never
drop one that carries information.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cirrus.config import load_pipeline
from cirrus.ingest.denoise import Denoiser
from cirrus.schema import Event, SourceRef, Ticket

DATA = Path(__file__).parent / "data" / "filler_zh.jsonl"


@pytest.fixture(scope="module")
def zh() -> Denoiser:
    return Denoiser.from_config(load_pipeline().denoise_for("zh"))


@pytest.fixture(scope="module")
def labelled() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]


def _drops(denoiser: Denoiser, role: str, text: str) -> bool:
    return denoiser.is_filler(Event(role, text))


# --- the labelled set ----------------------------------------------------------


def test_labelled_set_is_well_formed(labelled):
    assert len(labelled) >= 250
    for row in labelled:
        assert set(row) == {"role", "text", "filler"}, row
        assert row["role"] in ("customer", "agent") and isinstance(row["filler"], bool) and row["text"].strip()
    assert len({(r["role"], r["text"]) for r in labelled}) == len(labelled), "duplicate messages"
    share = sum(r["filler"] for r in labelled) / len(labelled)
    assert 0.4 <= share <= 0.6, share
    # both roles on both sides
    for role in ("customer", "agent"):
        for filler in (True, False):
            assert sum(1 for r in labelled if r["role"] == role and r["filler"] is filler) >= 40


def test_accuracy_and_no_information_dropped(zh, labelled):
    false_drops = [r for r in labelled if not r["filler"] and _drops(zh, r["role"], r["text"])]
    missed = [r for r in labelled if r["filler"] and not _drops(zh, r["role"], r["text"])]
    accuracy = 1 - (len(false_drops) + len(missed)) / len(labelled)
    report = "\n".join(
        [f"accuracy {accuracy:.4f} on {len(labelled)}"]
        + [f"  DROPPED INFORMATION {r['role']}: {r['text']}" for r in false_drops]
        + [f"  kept filler {r['role']}: {r['text']}" for r in missed]
    )
    print(report)
    assert len(false_drops) == 0, report
    assert accuracy >= 0.97, report


# --- targeted -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "text"),
    [
        ("customer", "您好"),
        ("customer", "在吗"),
        ("agent", "在的在的"),
        ("agent", "您好，很高兴为您服务"),
        ("agent", "亲，在的哦"),
        ("agent", "好的，请稍等"),
        ("agent", "稍等一下"),
        ("agent", "正在为您查询"),
        ("agent", "正在为您核实，请稍候"),
        ("agent", "感谢您的耐心等待"),
        ("agent", "您好，请问还在吗？"),
        ("agent", "请问您还在线吗"),
        ("customer", "嗯嗯"),
        ("customer", "明白了"),
        ("customer", "可以的"),
        ("customer", "没问题"),
        ("customer", "谢谢您的帮助"),
        ("agent", "不客气"),
        ("agent", "祝您工作顺利"),
        ("agent", "请问还有其他可以帮您的吗？"),
        ("agent", "请您对本次服务进行评价"),
        ("agent", "麻烦给个五星好评"),
        # clauses without spaces, several rules in one clause
        ("customer", "好的谢谢再见"),
        ("customer", "嗯嗯好的，谢谢啦~"),
        # emoticon-like tails and stickers
        ("customer", "好的😊"),
        ("customer", "谢谢[抱拳]"),
        ("customer", "好的呢(^_^)"),
        ("customer", "收到～～"),
        # the wish counts no days
        ("agent", "祝您有美好的一天！"),
        # 十分 / 万分 are "very", not ten minutes
        ("customer", "十分感谢！"),
        ("customer", "万分感谢"),
    ],
)
def test_filler_is_dropped(zh, role, text):
    assert _drops(zh, role, text)


@pytest.mark.parametrize(
    ("role", "text"),
    [
        ("agent", "好的，订单号是多少？"),
        ("customer", "还在，但是还是打不开"),
        ("customer", "谢谢，顺便问下发票怎么开？"),
        ("agent", "请稍等，我看到您的实例已欠费停机"),
        ("agent", "在的，IP是多少"),
        ("customer", "嗯，三台都不行"),
        ("customer", "为什么扣费了？"),
        ("customer", "怎么退款？"),
        ("customer", "好的，已重启"),
        ("customer", "可以了，谢谢"),
        ("customer", "收到了吗？"),
    ],
)
def test_information_is_kept(zh, role, text):
    assert not _drops(zh, role, text)


@pytest.mark.parametrize(
    "text",
    [
        "好的，２０２４",            # full-width digits
        "好的，2024",
        "好的，两台",                # Chinese numerals counting something
        "谢谢，半小时后再试",
        "好的，第二个",
        "嗯嗯，一天了",
        "好的，zhang@example.com",
        "好的，https://example.com",
        "好的，example.cn",
        "好的，i-bp1abc2def3",
    ],
)
def test_data_keeps_a_message_whatever_the_rules(zh, text):
    assert not _drops(zh, "customer", text)


@pytest.mark.parametrize(
    ("role", "text"),
    [
        ("customer", "谢谢张先生"),
        ("customer", "张先生，谢谢"),
        ("customer", "好的，李总"),
        ("customer", "谢谢老师！"),
        ("customer", "小王你好"),
        ("customer", "客服，在吗？"),
        ("agent", "王女士您好，请问还在吗？"),
        ("agent", "亲，好的呢"),
        ("agent", "尊敬的客户，您好"),
        ("agent", "不客气，欧阳女士，再见"),
    ],
)
def test_vocatives_are_ignored(zh, role, text):
    assert _drops(zh, role, text)


def test_a_name_alone_is_kept(zh):
    # it may answer "请问怎么称呼您？"
    for text in ("王女士", "张先生", "亲", "我是李先生", "我叫王芳，谢谢"):
        assert not _drops(zh, "customer", text), text


def test_a_question_mark_needs_a_rule_that_allows_it(zh):
    assert _drops(zh, "agent", "请问还在吗？")
    assert _drops(zh, "customer", "在吗？？")
    assert _drops(zh, "agent", "还有其他问题吗？")
    # an acknowledgement turned into a question is not filler
    assert not _drops(zh, "customer", "好的？")
    assert not _drops(zh, "customer", "嗯？")
    assert not _drops(zh, "customer", "？")


def test_a_clause_with_anything_unmatched_is_kept(zh):
    assert not _drops(zh, "customer", "好的不行")
    assert not _drops(zh, "customer", "好的[图片]")
    assert not _drops(zh, "customer", "谢谢，Linux")
    assert not _drops(zh, "customer", "在的，香港")


def test_length_counts_han_characters_and_latin_words(zh):
    limit = load_pipeline().denoise_for("zh").max_filler_words
    fits = "好的" * (limit // 2)
    assert _drops(zh, "customer", fits)
    assert not _drops(zh, "customer", fits + "好的")
    assert not _drops(zh, "customer", "好的 " + "ok " * limit)


def test_roles_have_their_own_rules(zh):
    assert _drops(zh, "agent", "正在为您查询")
    assert not _drops(zh, "customer", "正在为您查询")


def test_system_notices(zh):
    assert _drops(zh, "system", "客服小王已接入会话")
    assert _drops(zh, "system", "用户已离开")
    for text in ("退款已到账", "已扣费 20 元", "工单已升级", "支付失败", "会话已转接至技术支持"):
        assert not _drops(zh, "system", text), text


def test_tools_and_attachments_are_never_dropped(zh):
    ticket = Ticket(
        "T-zh",
        [
            Event("customer", "好的", ocr=["错误代码 502"]),
            Event("tool_call", call_id="c1", name="查询", arguments={}),
            Event("tool_result", call_id="c1", content="好的"),
        ],
        SourceRef("t.jsonl", line=1),
    )
    assert len(zh(ticket).events) == 3


def test_a_chinese_ticket_is_denoised(zh):
    ticket = Ticket(
        "T-zh",
        [
            Event("system", "客服小王已接入"),
            Event("agent", "您好，很高兴为您服务，请问有什么可以帮您？"),
            Event("customer", "在吗"),
            Event("customer", "我的网站打不开了，为什么？"),
            Event("agent", "好的，请稍等"),
            Event("agent", "请稍等，我看到您的实例已欠费停机"),
            Event("customer", "嗯，三台都不行"),
            Event("agent", "您好，请问还在吗？"),
            Event("customer", "还在，但是还是打不开"),
            Event("customer", "好的谢谢"),
            Event("agent", "不客气，祝您生活愉快！张先生再见~"),
            Event("system", "退款已到账"),
        ],
        SourceRef("t.jsonl", line=1),
        language="zh",
    )
    assert [e.text for e in zh(ticket).events] == [
        "我的网站打不开了，为什么？",
        "请稍等，我看到您的实例已欠费停机",
        "嗯，三台都不行",
        "还在，但是还是打不开",
        "退款已到账",
    ]


def test_english_messages_read_as_before(zh, pipeline_config):
    en = Denoiser.from_config(pipeline_config.denoise)
    assert en.is_filler(Event("agent", "You're welcome. Have a nice day, Ethan!"))
    assert not en.is_filler(Event("agent", "Thanks, it is back up. Have a nice day, Ethan!"))
    # the English rules do not drop Chinese
    assert not en.is_filler(Event("customer", "好的"))
    # English filler in a Chinese ticket
    assert zh.is_filler(Event("customer", "ok"))
    assert zh.is_filler(Event("customer", "Thank you!"))
    assert not zh.is_filler(Event("customer", "ok, the ID is i-bp1abc2def3"))


def test_zh_rules_are_configured():
    pipeline = load_pipeline()
    config = pipeline.denoise_for("zh")
    assert config.customer_filler and config.agent_filler
    assert config.customer_filler != pipeline.denoise.customer_filler
