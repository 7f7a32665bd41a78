"""Offline reply types (cirrus/ingest/annotate/rules.py): questions to the
customer are Inquire or Clarify, measured on the held-out labels of
benchmarks/data/reply_types.jsonl (benchmarks/reply_types.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from cirrus.config import AnnotateConfig, load_pipeline
from cirrus.ingest.annotate.base import ReplyToLabel
from cirrus.ingest.annotate.rules import RuleAnnotator, count_words, sentences

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "benchmarks" / "data" / "reply_types.jsonl"

# Measured on the held-out split when the rules were written (0.909 overall,
# 0.89 English, 0.934 Chinese; benchmarks/results/reply_types.md), a little
# below so that wording changes pass and broken rules do not.
HELDOUT_FLOOR = {"all": 0.88, "en": 0.85, "zh": 0.90}
HELDOUT_ASK_RECALL_FLOOR = 0.90  # share of Inquire/Clarify replies labelled Inquire or Clarify
BEFORE_HELDOUT_ACCURACY = 0.682  # the rules before this change, same data


def _benchmark():
    spec = importlib.util.spec_from_file_location("reply_types_benchmark", REPO / "benchmarks" / "reply_types.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def en() -> RuleAnnotator:
    return RuleAnnotator.from_config(load_pipeline().annotate_for("en"))


@pytest.fixture(scope="module")
def zh() -> RuleAnnotator:
    return RuleAnnotator.from_config(load_pipeline().annotate_for("zh"))


def _label(annotator: RuleAnnotator, reply: str, tools: tuple[str, ...] = ()) -> str:
    return annotator.label_one(ReplyToLabel(query="", reply=reply, tool_names=tools))


# --- the cases: offers phrased as questions are not Solutions ---------

@pytest.mark.parametrize("reply", [
    "Shall I refund the order to your original payment method?",
    "Shall I refund the $42.50 to the card ending 4412?",
    "Would you like me to rebook you on the 3:40pm flight to Denver instead?",
    "I can see order 88213 was delivered on 3 May without the charger. Shall I refund it?",
    "I can add it with your confirmation. The rule would be: allow TCP 22 from 203.0.113.7. Shall I go ahead?",
    "Can I go ahead and block the card now? You'll get a new one in 3-5 working days.",
])
def test_an_offer_is_a_question_to_the_customer_not_a_solution(en: RuleAnnotator, reply: str) -> None:
    assert _label(en, reply) == "Clarify"


@pytest.mark.parametrize("reply, expected", [
    ("Could you send me the order number? It starts with 'SO'.", "Inquire"),
    ("What's the booking reference on your ticket?", "Inquire"),
    ("Have you already tried restarting the router?", "Inquire"),
    ("Is the problem on Wi-Fi, mobile data, or both?", "Inquire"),
    ("Which instance is it, and what exactly is slow: SSH, the website, or commands on the server?", "Inquire"),
    ("Just to confirm, you'd like to cancel the whole order?", "Clarify"),
    ("So the app opens but freezes when you tap Checkout, is that right?", "Clarify"),
    ("Let me confirm: you want the delivery on Saturday and not Friday?", "Clarify"),
    ("Would you prefer a refund or an exchange for a larger size?", "Clarify"),
    ("Do you mean the charge from 12 March or the one from 14 March?", "Clarify"),
])
def test_english_questions(en: RuleAnnotator, reply: str, expected: str) -> None:
    assert _label(en, reply) == expected


@pytest.mark.parametrize("reply, expected", [
    ("我帮您申请退款可以吗？", "Clarify"),
    ("需要我帮您改签到下午三点的航班吗？", "Clarify"),
    ("要不要我现在就帮您把订阅取消？", "Clarify"),
    ("您是想暂停会员三个月，而不是直接注销，对吧？", "Clarify"),
    ("您说的是3月12号那笔扣款还是14号那笔？", "Clarify"),
    ("请问您的手机号是多少？", "Inquire"),
    ("您用的是什么型号的手机？", "Inquire"),
    ("您之前有没有尝试过重启路由器？", "Inquire"),
    ("请问您是通过什么渠道支付的，微信还是银行卡？", "Inquire"),  # a wh-word: information, not a choice
    ("您好，请问是什么时候发现这笔扣款的吗", "Inquire"),  # no question mark, a trailing 吗
])
def test_chinese_questions(zh: RuleAnnotator, reply: str, expected: str) -> None:
    assert _label(zh, reply) == expected


# --- mixed replies (the rule: benchmarks/data/README.md, the module docstring) --

def test_a_statement_then_a_question_is_the_question(en: RuleAnnotator, zh: RuleAnnotator) -> None:
    assert _label(en, "Our terms allow a downgrade at any time. Would you like me to move you back today?") == "Clarify"
    assert _label(en, "The payment is showing as pending on our side. Could you check whether it has left "
                      "your bank account?") == "Inquire"
    assert _label(en, "I'm sorry your card was swallowed by the ATM. Which branch was it?") == "Inquire"
    assert _label(zh, "非常理解您的心情。按照我们的规定，延误超过四小时可以免费退票。请问需要我现在帮您办理吗？") == "Clarify"


def test_a_question_then_a_statement_is_still_the_question(en: RuleAnnotator) -> None:
    assert _label(en, "May I have the IMEI number of the phone? You can get it by dialling *#06#.") == "Inquire"


def test_a_short_reply_that_acts_and_offers_more_is_the_offer(en: RuleAnnotator, zh: RuleAnnotator) -> None:
    assert _label(en, "I've cancelled the booking. Would you like me to rebook you on the 3pm flight?") == "Clarify"
    assert _label(zh, "已经帮您取消了原订单，需要我重新帮您下一单吗？") == "Clarify"


def test_a_long_reply_that_acts_and_asks_is_a_solution(en: RuleAnnotator, zh: RuleAnnotator) -> None:
    reply = ("I've reissued your ticket on the 18:40 flight to Lisbon, kept your aisle seat, and waived the change "
             "fee because the original flight was cancelled by us. Your new e-ticket number is 125-2231098841. "
             "Would you like me to add the checked bag again as well?")
    assert count_words(reply) > 30
    assert _label(en, reply) == "Solution"
    assert _label(zh, "我已经帮您查询了线路，发现是您家光猫的注册信息在昨晚系统升级后丢失了，导致无法拨号上网。"
                      "现在已经重新下发了配置，后台显示光猫已经上线，速率正常。麻烦您重启一下路由器，再测试一下网络是否恢复？") \
        == "Solution"


def test_asking_to_try_again_after_a_fix_is_part_of_the_solution(en: RuleAnnotator, zh: RuleAnnotator) -> None:
    assert _label(en, "I've reset the password. Could you try logging in and tell me if it works?") == "Solution"
    assert _label(zh, "已为您重启实例，请您再试一下现在能否登录？") == "Solution"
    assert _label(en, "Could you try logging in from a private window and tell me whether the same error "
                      "appears?") == "Inquire"  # no fix before it: a diagnostic question


def test_closings_and_rhetorical_questions_ask_nothing(en: RuleAnnotator, zh: RuleAnnotator) -> None:
    assert _label(en, "I cancelled the second subscription and credited the $12 to your account balance. "
                      "Is there anything else I can help you with?") == "Solution"
    assert _label(en, "Not sure where to find the invoice? Go to Billing > History and click the PDF icon.") \
        == "Solution"
    assert _label(zh, "我已经帮您取消了自动续费，下次不会再扣款。还有其他可以帮您的吗？") == "Solution"
    assert _label(zh, "不知道在哪里下载发票？在订单详情页点击“申请开票”，开好后可以直接下载PDF。") == "Solution"


def test_tool_calls_alone_are_a_solution(en: RuleAnnotator) -> None:
    assert _label(en, "", ("refund_order",)) == "Solution"


def test_sentences_are_cut_at_english_and_chinese_ends() -> None:
    assert sentences("It's $80.10 now, version 5.2.1. Shall I apply it? Thanks!") == \
        ["It's $80.10 now, version 5.2.1.", "Shall I apply it?", "Thanks!"]
    assert sentences("已为您退款。需要帮您重新下单吗？好的!谢谢") == ["已为您退款。", "需要帮您重新下单吗？", "好的!", "谢谢"]
    assert sentences("Steps:\n1. Open Settings\n2. Tap Reset") == ["Steps:", "1. Open Settings", "2. Tap Reset"]


# --- the configuration still decides ------------------------------------------

def test_configured_patterns_override_the_question_shapes() -> None:
    bare = RuleAnnotator.from_config(AnnotateConfig())
    # no patterns: the shapes alone
    assert _label(bare, "Shall I refund the order?") == "Clarify"
    assert _label(bare, "What is your order number?") == "Inquire"
    assert _label(bare, "Send me the order number.") != "Inquire"
    configured = RuleAnnotator.from_config(AnnotateConfig(
        inquire_patterns=[r"(?i)^send me\b"],
        clarify_patterns=[r"(?i)\border number\?"],
        solution_patterns=[r"(?i)\bzapped\b"],
        appease_patterns=[r"(?i)\bwhoops\b"],
        standard_patterns=[r"(?i)\bhouse rules\b"],
    ))
    assert _label(configured, "Send me the order number.") == "Inquire"  # no question mark, but configured
    assert _label(configured, "What is your order number?") == "Clarify"  # a wh-question, configured as Clarify
    assert _label(configured, "We zapped it.") == "Solution"
    assert _label(configured, "Whoops.") == "Appease"
    assert _label(configured, "These are the house rules.") == "Standard"


def test_the_pipeline_file_patterns_are_used(tmp_path: Path) -> None:
    text = (REPO / "pipelines" / "default.toml").read_text(encoding="utf-8")
    marker = "[annotate]\n"
    assert marker in text
    text = text.replace(marker, marker + "# a test pattern\n", 1).replace(
        "inquire_patterns = [\n", "inquire_patterns = [\n    '(?i)\\bpineapple\\b',\n", 1)
    path = tmp_path / "custom.toml"
    path.write_text(text, encoding="utf-8")
    annotator = RuleAnnotator.from_config(load_pipeline(path).annotate_for("en"))
    assert _label(annotator, "Pineapple, please.") == "Inquire"


# --- the labelled data and the held-out floor ----------------------------------

def test_the_labelled_file_is_well_formed() -> None:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) >= 300
    assert {r["label"] for r in rows} == {"Solution", "Standard", "Inquire", "Clarify", "Appease"}
    assert {r["lang"] for r in rows} == {"en", "zh"}
    assert {r["split"] for r in rows} == {"tune", "heldout"}
    assert len({r["text"] for r in rows}) == len(rows)
    heldout = sum(r["split"] == "heldout" for r in rows) / len(rows)
    assert 0.4 <= heldout <= 0.6
    chinese = sum(r["lang"] == "zh" for r in rows) / len(rows)
    assert 0.3 <= chinese <= 0.5


def test_heldout_accuracy_is_above_the_measured_floor() -> None:
    bench = _benchmark()
    rows = bench.load(DATA)
    result = bench.evaluate(rows, bench.predict(rows), ("heldout",))["heldout"]
    for lang, floor in HELDOUT_FLOOR.items():
        assert result[lang]["accuracy"] >= floor, (lang, result[lang]["accuracy"], result[lang]["confusion"])
        assert result[lang]["accuracy"] > BEFORE_HELDOUT_ACCURACY
    assert result["all"]["asks"]["recall"] >= HELDOUT_ASK_RECALL_FLOOR
    # questions to the customer are not Solutions
    confusion = result["all"]["confusion"]
    assert confusion["Clarify"]["Solution"] + confusion["Inquire"]["Solution"] == 0, confusion
