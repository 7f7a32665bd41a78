"""BM25 knowledge retrieval over Chinese (jieba) and unchanged over English."""

from __future__ import annotations

import logging

import bm25s
import numpy as np
import pytest

from cirrus.agents.baselines import RetrievalAgent
from cirrus.ingest import knowledge
from cirrus.ingest.knowledge import KnowledgeBase, rank, tokenize
from cirrus.schema import KnowledgeDoc

ZH_KB = {
    "refund": ("退款政策", "包年包月的云服务器在购买后五天内可以申请无理由全额退款。超过五天按剩余时长退还费用，"
               "已使用的代金券不退。退款会原路返回到您的付款账户，一般三到五个工作日到账。"),
    "invoice": ("发票开具", "在费用中心的发票管理页面可以申请增值税普通发票或专用发票。开票前请先设置发票抬头和纳税人识别号，"
                "抬头填错时可以作废后重新开具，电子发票会发送到预留邮箱。"),
    "realname": ("实名认证", "账号必须完成实名认证才能购买云产品。个人认证需要上传身份证并进行人脸识别，"
                 "企业认证需要营业执照和对公账户打款验证。认证审核未通过时请检查证件照片是否清晰。"),
    "beian": ("ICP备案", "网站使用中国内地的服务器对外提供服务前，域名必须完成ICP备案。备案需要提交主体信息、网站负责人信息，"
              "管局审核通常需要二十个工作日，备案成功后才能开放80和443端口访问网站。"),
    "ecs-connect": ("ECS实例无法连接", "ECS实例远程登录失败时，先在控制台确认实例处于运行中状态，再检查系统防火墙和sshd服务是否正常。"
                    "使用SSH连接Linux实例超时，通常是22端口未放行或者公网IP未分配；Windows实例请检查远程桌面3389端口。"),
    "security-group": ("安全组规则", "安全组是实例的虚拟防火墙，入方向规则决定哪些端口和来源地址可以访问实例。"
                       "添加规则时选择协议类型、端口范围和授权对象，例如放行TCP 8080端口给0.0.0.0/0。规则修改后立即生效。"),
    "bandwidth": ("公网带宽", "实例的公网带宽决定下载和上传速度，按固定带宽计费时峰值不会超过购买的带宽值。"
                  "网速慢、延迟高时可以在监控中查看出网流量是否跑满，必要时在控制台升级带宽，升级后立即生效。"),
    "password": ("重置实例密码", "忘记实例登录密码时，可以在控制台实例详情页选择重置密码，设置新密码后需要重启实例才能生效。"
                 "新密码长度为8到30个字符，必须同时包含大写字母、小写字母和数字。"),
    "dns": ("域名解析", "在云解析DNS控制台为域名添加A记录，将主机记录指向服务器的公网IP；CNAME记录用于指向另一个域名。"
            "修改解析记录后，各地DNS缓存刷新需要一段时间，TTL越小生效越快。"),
    "overdue": ("欠费停机", "账户余额不足导致欠费后，按量付费的资源会在欠费后停止服务，停机十五天后数据会被释放。"
                "充值结清欠款后，停止的实例会自动恢复运行。"),
}

ZH_QUERIES = [
    ("我买的服务器不想用了，钱能退回来吗", "refund"),
    ("开票的时候抬头写错了，想重新开一张", "invoice"),
    ("身份证上传以后人脸识别总是过不了", "realname"),
    ("新网站要上线，域名需要先办备案吗", "beian"),
    ("ECS实例 SSH 连不上", "ecs-connect"),
    ("想让外网访问8080端口，防火墙规则怎么加", "security-group"),
    ("服务器下载文件网速特别慢", "bandwidth"),
    ("服务器的登录密码忘了，怎么改一个新的", "password"),
    ("A记录加好了但是域名打不开，是不是解析还没生效", "dns"),
    ("账户没钱了服务器被停掉了，充值以后能恢复吗", "overdue"),
]

EN_DOCS = [
    ("Refund policy", "Subscriptions can be refunded in full within five days of purchase. Refunds go back to the original payment method."),
    ("Invoices", "Request a VAT invoice from the billing console. Set the invoice title and tax id before issuing the invoice."),
    ("Cannot connect to an instance", "If SSH to an ECS instance times out, check that port 22 is open in the security group and the instance is running."),
    ("Security groups", "A security group is a virtual firewall. Add an inbound rule with the protocol, port range and source address."),
    ("Reset the password", "Reset the instance password from the console and restart the instance for the new password to take effect."),
    ("DNS records", "Add an A record pointing the host to the public IP. Changes propagate after the TTL expires."),
]
EN_QUERIES = [
    "I want my money back for the subscription",
    "ssh times out when I connect to my server",
    "how do I open port 8080 in the firewall",
    "forgot the root password of my instance",
    "my domain does not resolve after adding the A record",
    "the invoice title is wrong",
]


def _docs(kb: dict[str, tuple[str, str]]) -> list[KnowledgeDoc]:
    return [KnowledgeDoc(doc_id=doc_id, title=title, text=text) for doc_id, (title, text) in kb.items()]


@pytest.fixture(scope="module")
def zh_kb() -> KnowledgeBase:
    return KnowledgeBase(_docs(ZH_KB))


def test_chinese_queries_worded_unlike_the_docs_find_the_right_document(zh_kb: KnowledgeBase) -> None:
    hits = [(query, expected, [d.doc_id for d in zh_kb.top(query, 3)]) for query, expected in ZH_QUERIES]
    top1 = sum(1 for _, expected, got in hits if got[:1] == [expected])
    assert top1 >= 9, [h for h in hits if h[2][:1] != [h[1]]]
    assert all(expected in got for _, expected, got in hits), hits


def test_a_mixed_chinese_english_query_finds_the_connection_doc(zh_kb: KnowledgeBase) -> None:
    assert tokenize(["ECS实例 SSH 连不上"])[0][:3] == ["ecs", "实例", "ssh"]
    assert zh_kb.top("ECS实例 SSH 连不上", 1)[0].doc_id == "ecs-connect"
    assert zh_kb.top("Linux实例远程ssh timeout了", 1)[0].doc_id == "ecs-connect"


def test_rank_orders_a_tickets_own_chinese_documents() -> None:
    docs = _docs(ZH_KB)
    assert [d.doc_id for d in rank(docs, "实名认证审核一直不通过", 2)][0] == "realname"


def test_chinese_tokens_drop_stop_words_and_punctuation() -> None:
    tokens = tokenize(["您好，请问我的发票是不是已经开好了吗？谢谢！"])[0]
    assert "发票" in tokens
    assert not {"您好", "请问", "我", "的", "是", "吗", "谢谢", "，", "？", "！", "了"} & set(tokens)
    assert all(t.strip() for t in tokens)


def test_non_han_runs_follow_bm25s_english_rule() -> None:
    # the runs between Han text: lower-cased \w\w+ tokens, English stop words out
    assert tokenize(["The ECS-instance 无法连接 on Port 22 and IP 10.0.0.1"])[0] == [
        "ecs", "instance", "无法", "连接", "port", "22", "ip", "10"]


def test_english_texts_are_tokenized_exactly_as_bm25s_does() -> None:
    texts = [f"{t}\n{x}" for t, x in EN_DOCS] + EN_QUERIES + ["", "a an the", "Don't e-mail me: ops@example.com!"]
    assert tokenize(texts) == bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)
    # one Chinese text in the batch does not change how the English ones are read
    mixed = tokenize(texts + ["退款"])
    assert mixed[:-1] == bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)


def test_english_ranking_is_unchanged() -> None:
    docs = [KnowledgeDoc(doc_id=f"d{i}", title=t, text=x) for i, (t, x) in enumerate(EN_DOCS)]
    kb = KnowledgeBase(docs)
    old = bm25s.BM25()
    old.index(bm25s.tokenize([f"{d.title}\n{d.text}" for d in docs], stopwords="en", return_ids=False,
                             show_progress=False), show_progress=False)
    for query in EN_QUERIES:
        scores = np.asarray(old.get_scores(bm25s.tokenize([query], stopwords="en", return_ids=False,
                                                          show_progress=False)[0]))
        expected = [docs[i].doc_id for i in np.argsort(-scores, kind="stable")[:3] if scores[i] > 0]
        assert [d.doc_id for d in kb.top(query, 3)] == expected, query
        assert [d.doc_id for d in rank(docs, query, 3)] == expected[:3] or len(expected) < 3
    assert [d.doc_id for d in kb.top(EN_QUERIES[0], 1)] == ["d0"]
    assert [d.doc_id for d in kb.top(EN_QUERIES[1], 1)] == ["d2"]


def test_jieba_is_initialised_once_and_quietly(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        tokenize(["备案"])
        first = knowledge._segmenter()
        tokenize(["域名解析"])
    assert knowledge._segmenter() is first
    assert not [r for r in caplog.records if r.name == "jieba" and r.levelno < logging.WARNING]


def test_the_retrieval_baseline_reads_chinese_knowledge() -> None:
    task = {"task_id": "t1", "checkpoints": [], "knowledge": [{"doc_id": k, "title": t, "text": x} for k, (t, x) in ZH_KB.items()]}
    passage, score = RetrievalAgent([])._best_passage(task["knowledge"], "服务器登录密码忘了怎么办")
    assert score > 0 and "重置密码" in passage
