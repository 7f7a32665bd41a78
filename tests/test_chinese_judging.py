"""Judging Chinese conversations: the offline judge segments Chinese into
words (a clause is not one word), knows Chinese dead ends, and the LLM
judges' prompts say the texts may be in any language."""

from __future__ import annotations

import asyncio

from cirrus.judges import prompts
from cirrus.judges.local import LocalCoverageJudge, LocalFluencyChecker, content_words

REFERENCE = "您的实例因欠费已停机。请先在控制台的费用中心续费，续费成功后在实例列表中重启实例即可恢复访问。"


def _covers(reference: str, candidate: str) -> bool:
    return asyncio.run(LocalCoverageJudge().covers([], "实例访问不了了", reference, candidate)).ok


def test_chinese_text_is_segmented_into_words():
    words = content_words(REFERENCE)
    assert {"欠费", "停机", "续费", "重启", "实例"} <= words
    assert all(len(w) <= 4 for w in words)


def test_a_paraphrase_is_included_and_a_courtesy_is_not():
    paraphrase = "实例是因为欠费被停机了，您到控制台费用中心续费后，再到实例列表重启实例就可以访问了。"
    assert _covers(REFERENCE, paraphrase)
    assert not _covers(REFERENCE, "好的，请稍等，正在为您查询。")
    assert not _covers(REFERENCE, "建议您检查安全组规则是否放行了22端口。")


def test_a_chinese_dead_end_does_not_let_the_conversation_go_on():
    checker = LocalFluencyChecker()
    dead = [{"role": "assistant", "content": "抱歉，这个问题我无法为您处理。"}]
    alive = [{"role": "assistant", "content": "请提供一下您的实例ID。"}]
    assert not asyncio.run(checker.follows(dead, "好的，我的实例ID是i-bp1xxx")).ok
    assert asyncio.run(checker.follows(alive, "好的，我的实例ID是i-bp1xxx")).ok


def test_the_judges_are_told_the_texts_may_be_chinese():
    for system in (prompts.COVERAGE_SYSTEM, prompts.COVERAGE_LATER_SYSTEM, prompts.FLUENCY_SYSTEM):
        assert "Chinese" in system and "any language" in system
