"""Reply types of Chinese agent replies: the [languages.zh.annotate] rules."""

from __future__ import annotations

import re

import pytest

from cirrus.config import load_pipeline
from cirrus.ingest.annotate.base import ReplyToLabel
from cirrus.ingest.annotate.rules import RuleAnnotator

# (customer query, agent reply, tool calls made in the turn, expected type)
LABELLED: list[tuple[str, str, tuple[str, ...], str]] = [
    # --- Inquire: the agent asks for what it needs
    ("我的服务器连不上了", "请提供一下您的实例ID，我这边帮您查看。", (), "Inquire"),
    ("退款怎么还没到账", "麻烦您提供一下订单号，我帮您核实退款进度。", (), "Inquire"),
    ("控制台一直报错", "能否告知一下具体的报错信息？最好附上截图。", (), "Inquire"),
    ("域名解析不生效", "请问您的域名是多少？", (), "Inquire"),
    ("账号登录不了", "方便发一下登录页面的报错截图吗？", (), "Inquire"),
    ("发票开错了", "需要您提供一下发票号码和正确的开票信息。", (), "Inquire"),
    ("实例很卡", "可以告诉我一下您是从什么时候开始出现卡顿的吗？", (), "Inquire"),
    ("短信发不出去", "请您把短信发送失败时返回的错误码发给我。", (), "Inquire"),
    ("数据库连接超时", "请问您的数据库实例在哪个地域？", (), "Inquire"),
    ("备案被驳回了", "麻烦您上传一下驳回通知的截图，我帮您看看。", (), "Inquire"),
    # --- Clarify: the agent checks it understood
    ("服务器打不开", "您是指网站打不开，还是远程登录不上服务器呢？", (), "Clarify"),
    ("我要退掉那个", "您说的是上周购买的那台包年包月的ECS吗？", (), "Clarify"),
    ("帮我把带宽改一下", "跟您确认一下，您是想把带宽从5M升级到10M，对吗？", (), "Clarify"),
    ("密码不对", "您的意思是实例的登录密码，而不是控制台账号的密码，是吗？", (), "Clarify"),
    ("费用不对", "我理解的是您觉得本月的扣费比上个月多，是这样吗？", (), "Clarify"),
    ("那个实例有问题", "请问是i-bp1abc这台还是i-bp1def这台出现了问题？", (), "Clarify"),
    ("证书过期了", "确认一下，您说的证书是SSL证书还是备案的电子证书？", (), "Clarify"),
    ("这个要多少钱", "您是想问续费的价格，还是新购的价格呢？", (), "Clarify"),
    # --- Appease: apology or reassurance, nothing new
    ("等了好几天了", "非常抱歉让您久等了，给您带来不便了。", (), "Appease"),
    ("你们服务太差了", "理解您的心情，真的很抱歉给您造成了困扰。", (), "Appease"),
    ("怎么还没处理", "不好意思，这边也在尽力帮您跟进，请您放心。", (), "Appease"),
    ("我很着急", "非常理解您着急的心情，我们会尽快处理的。", (), "Appease"),
    ("好吧", "感谢您的耐心等待和理解。", (), "Appease"),
    ("又出问题了", "实在抱歉，给您添麻烦了。", (), "Appease"),
    ("你们到底能不能解决", "对此我们深表歉意，请您不要着急。", (), "Appease"),
    ("我等不了了", "十分抱歉，我非常理解您的感受。", (), "Appease"),
    # --- Standard: policy, process, general information
    ("退款多久到账", "根据规定，退款会原路退回，一般需要3-5个工作日到账。", (), "Standard"),
    ("可以开专票吗", "按照政策，增值税专用发票需要完成企业实名认证后才能申请。", (), "Standard"),
    ("备案要多久", "一般情况下，管局审核通常需要20个工作日左右。", (), "Standard"),
    ("能不能无理由退款", "按照退订规则，五天无理由退款仅适用于首次购买的包年包月实例。", (), "Standard"),
    ("怎么用API", "具体用法请参考帮助文档中的API参考章节。", (), "Standard"),
    ("能用个人账号开发票吗", "个人认证的账号目前暂不支持开具增值税专用发票。", (), "Standard"),
    ("实名认证需要什么", "根据国家相关法规要求，购买云产品前需要完成实名认证。", (), "Standard"),
    ("欠费了会怎么样", "通常情况下，欠费后资源会保留15天，超过保留期后数据将被释放。", (), "Standard"),
    ("工单多久有人回", "工单一般会在2小时内有工程师响应，请您留意工单回复。", (), "Standard"),
    # --- Solution: the agent acts, or gives steps, commands, a diagnosis
    ("帮我重置下密码", "已为您重置实例密码，新密码已发送到您的手机，请重启实例后生效。", (), "Solution"),
    ("退款申请了吗", "已经帮您提交了退款申请，款项将原路退回。", (), "Solution"),
    ("怎么放行端口", "请按以下步骤操作：\n1. 登录ECS控制台\n2. 进入安全组页面\n3. 添加入方向规则放行8080端口", (), "Solution"),
    ("网站打不开", "原因是您的安全组没有放行80端口，添加规则后即可访问。", (), "Solution"),
    ("磁盘满了", "您可以执行命令 `df -h` 查看磁盘占用，再用 `du -sh /*` 找出占用最大的目录。", (), "Solution"),
    ("怎么改带宽", "进入控制台的实例详情页，点击“更改带宽”，选择新的带宽值后确认支付即可。", (), "Solution"),
    ("服务开通了吗", "您好，已为您开通了对象存储服务，现在可以正常使用了。", (), "Solution"),
    ("实例被锁了", "", ("unlock_instance",), "Solution"),
    ("查一下我的订单", "查到了，您的订单状态是已支付。", ("get_order",), "Solution"),
    ("一直连不上", "非常抱歉给您带来不便，经排查是宿主机故障导致的，我们已经为您迁移了实例，现在可以正常连接了。", (), "Solution"),
    ("解析不生效", "您的A记录指向的IP填错了，已帮您修改为47.96.1.2，预计10分钟内生效。", (), "Solution"),
]

# More replies, without their queries (the rules read only the reply).
LABELLED += [
    ("", "您好，请您提供一下注册账号绑定的手机号。", (), "Inquire"),
    ("", "麻烦截个图给我看一下控制台的提示。", (), "Inquire"),
    ("", "请问您购买的是哪个规格的实例？", (), "Inquire"),
    ("", "您方便把完整的报错日志贴一下吗？", (), "Inquire"),
    ("", "请告诉我您的主账号UID，我这边去查一下。", (), "Inquire"),
    ("", "您的意思是希望把这台实例的计费方式改成按量付费吗？", (), "Clarify"),
    ("", "想跟您确认一下，出问题的是生产环境还是测试环境？", (), "Clarify"),
    ("", "您说的无法访问，是所有地区都打不开，还是只有部分地区？", (), "Clarify"),
    ("", "我理解您是想申请退款而不是退订，对吗？", (), "Clarify"),
    ("", "很抱歉这次给您带来了不好的体验。", (), "Appease"),
    ("", "您反馈的问题我们非常重视，请您放心。", (), "Appease"),
    ("", "辛苦您了，感谢您的理解与支持。", (), "Appease"),
    ("", "十分理解您的心情，这边一定会帮您跟进到底。", (), "Appease"),
    ("", "根据平台规定，代金券不支持提现或转让。", (), "Standard"),
    ("", "正常情况下域名解析修改后10分钟左右生效，最长不超过48小时。", (), "Standard"),
    ("", "按照退订规则，已使用的时长费用不予退还。", (), "Standard"),
    ("", "详细的计费说明可以查看官网的产品定价页面。", (), "Standard"),
    ("", "包年包月实例到期后会有15天的保留期。", (), "Standard"),
    ("", "这边已经帮您把工单升级给二线工程师了，会尽快联系您。", (), "Solution"),
    ("", "您的实例因为内存不足触发了OOM，建议升级到4G内存规格。", (), "Solution"),
    ("", "可以通过 `systemctl restart sshd` 重启SSH服务后再试试。", (), "Solution"),
    ("", "已为您解封账号，现在可以正常登录了，请您再试一下。", (), "Solution"),
    ("", "在安全组里添加一条入方向规则，端口填3306，授权对象填您的本地公网IP即可。", (), "Solution"),
    ("", "重置密码的入口在实例列表右侧的“更多”菜单里，选择“重置实例密码”就可以。", (), "Solution"),
    ("", "请把您的订单编号发我一下。", (), "Inquire"),
    ("", "您这边能提供下出问题的时间段吗？", (), "Inquire"),
    ("", "请问报错的具体内容是什么？", (), "Inquire"),
    ("", "我需要您的实例所在地域和实例名称，才能帮您排查。", (), "Inquire"),
    ("", "可以发一下您执行的命令和返回结果吗？", (), "Inquire"),
    ("", "您是要开具个人发票还是企业发票呢？", (), "Clarify"),
    ("", "请问您指的是账号余额，还是代金券余额？", (), "Clarify"),
    ("", "这边确认下，您是在手机端操作的对吧？", (), "Clarify"),
    ("", "您的问题是能ping通但是网页打不开，我这样理解对吗？", (), "Clarify"),
    ("", "给您添麻烦了，真的很不好意思。", (), "Appease"),
    ("", "我们非常重视您的反馈，感谢您的包容。", (), "Appease"),
    ("", "您别着急，这边会持续帮您关注的。", (), "Appease"),
    ("", "很遗憾听到这样的情况，请您谅解。", (), "Appease"),
    ("", "发票开具后不支持修改抬头，只能作废重开。", (), "Standard"),
    ("", "按量付费的实例按小时结算，每小时扣费一次。", (), "Standard"),
    ("", "根据工信部要求，未备案的域名无法在内地服务器上解析访问。", (), "Standard"),
    ("", "退款审核通过后，款项一般原路退回。", (), "Standard"),
    ("", "关于产品计费的详细说明，请以官网公布的价格为准。", (), "Standard"),
    ("", "退款已处理完成，款项将在1-3个工作日内原路退回。", (), "Solution"),
    ("", "已为您重启实例，请您再试一下现在能否登录？", (), "Solution"),
    ("", "这个报错是因为您的AccessKey已被禁用，在RAM控制台重新启用即可。", (), "Solution"),
    ("", "您可以先在服务器上运行 sudo systemctl status nginx 看一下服务状态。", (), "Solution"),
    ("", "建议把MySQL的max_connections调大到1000，然后重启数据库。", (), "Solution"),
    ("", "工单已经转交给网络组，他们会直接联系您。", (), "Solution"),
    ("", "您账号里的两台实例我都已经续费到明年3月了。", (), "Solution"),
    ("", "辛苦您提供一下绑定的邮箱地址。", (), "Inquire"),
    ("", "请问您这边是用什么客户端连接的？", (), "Inquire"),
    ("", "麻烦您登录后把账单详情页截个图发过来。", (), "Inquire"),
    ("", "请您告知一下出现问题的域名。", (), "Inquire"),
    ("", "您是说扣了两次费对吗？", (), "Clarify"),
    ("", "请问您要退订的是整个套餐还是其中一个实例？", (), "Clarify"),
    ("", "跟您核实一下，您说的实例ID是i-2ze8xxx对吧？", (), "Clarify"),
    ("", "您是希望修改域名的DNS服务器，还是修改解析记录？", (), "Clarify"),
    ("", "让您久等了，非常抱歉。", (), "Appease"),
    ("", "能理解您现在的焦急，我们一定尽力。", (), "Appease"),
    ("", "请放心，我会一直跟进这个问题的。", (), "Appease"),
    ("", "企业认证通常需要1-2个工作日审核。", (), "Standard"),
    ("", "按照我们的服务协议，故障赔偿以代金券的形式发放。", (), "Standard"),
    ("", "每个账号默认最多可以创建20台按量付费实例。", (), "Standard"),
    ("", "域名转入的流程和注意事项可以参考官网帮助中心。", (), "Standard"),
    ("", "您的安全组只放行了22端口，需要再添加443端口的入方向规则。", (), "Solution"),
    ("", "已为您申请了一张50元的代金券作为补偿，请注意查收。", (), "Solution"),
    ("", "出现这个问题是因为您的磁盘已经满了，清理/var/log下的日志即可。", (), "Solution"),
    ("", "我这边把您的配额调整到了50台，您刷新页面就能看到。", (), "Solution"),
    ("", "第一步，在控制台停止实例；第二步，更换系统盘；第三步，重新启动。", (), "Solution"),
]

ACCURACY_FLOOR = 0.85


@pytest.fixture(scope="module")
def zh() -> RuleAnnotator:
    return RuleAnnotator.from_config(load_pipeline().annotate_for("zh"))


def _item(query: str, reply: str, tools: tuple[str, ...]) -> ReplyToLabel:
    return ReplyToLabel(query=query, reply=reply, tool_names=tools)


def test_the_labelled_set_covers_every_type() -> None:
    counts = {t: sum(1 for *_, label in LABELLED if label == t)
              for t in ("Inquire", "Clarify", "Appease", "Standard", "Solution")}
    assert min(counts.values()) >= 8, counts


def test_chinese_replies_are_labelled_accurately(zh: RuleAnnotator) -> None:
    got = zh.label([_item(q, r, t) for q, r, t, _ in LABELLED])
    wrong = [(r, want, have) for (_, r, _, want), have in zip(LABELLED, got) if want != have]
    accuracy = 1 - len(wrong) / len(LABELLED)
    assert accuracy >= ACCURACY_FLOOR, (accuracy, wrong)


@pytest.mark.parametrize("kind", ["Inquire", "Clarify", "Appease", "Standard", "Solution"])
def test_each_type_is_mostly_recognised(zh: RuleAnnotator, kind: str) -> None:
    rows = [(q, r, t) for q, r, t, label in LABELLED if label == kind]
    hits = sum(1 for q, r, t in rows if zh.label_one(_item(q, r, t)) == kind)
    assert hits / len(rows) >= 0.75, (kind, hits, len(rows))


def test_the_chinese_section_has_every_list_and_compiles() -> None:
    config = load_pipeline().languages["zh"].annotate
    assert config is not None
    for field in ("inquire_patterns", "clarify_patterns", "appease_patterns", "standard_patterns", "solution_patterns"):
        patterns = getattr(config, field)
        assert patterns, field
        for pattern in patterns:
            re.compile(pattern)


def test_english_tickets_keep_the_base_rules() -> None:
    pipeline = load_pipeline()
    assert pipeline.annotate_for("en") == pipeline.annotate
    assert pipeline.annotate_for("zh") != pipeline.annotate
    english = RuleAnnotator.from_config(pipeline.annotate_for("en"))
    assert english.label_one(_item("x", "Could you please provide your instance id?", ())) == "Inquire"
    assert english.label_one(_item("x", "I have reset the password for you.", ())) == "Solution"
    assert english.label_one(_item("x", "Sorry for the trouble.", ())) == "Appease"
