"""Language detection (cirrus/ingest/language.py): labelled tickets, the hard
mixed ones included, and the normalisation of given language codes."""

from __future__ import annotations

import pytest

from cirrus.ingest.language import HAN_SHARE, detect_language, normalize_language, ticket_language
from cirrus.schema import Event, SourceRef, Ticket

LOG = """2024-05-18 10:21:07.412 ERROR [main] o.a.c.c.C.[Tomcat].[localhost] - Exception starting filter
java.net.ConnectException: Connection refused (Connection refused)
    at java.net.PlainSocketImpl.socketConnect(Native Method)
    at java.net.AbstractPlainSocketImpl.doConnect(AbstractPlainSocketImpl.java:350)
    at com.mysql.cj.jdbc.ConnectionImpl.connectOneTryOnly(ConnectionImpl.java:956)
Caused by: com.mysql.cj.exceptions.CJCommunicationsException: Communications link failure"""

TRACEBACK = """Traceback (most recent call last):
  File "/srv/app/main.py", line 12, in <module>
    client = oss2.Bucket(auth, endpoint, bucket_name)
oss2.exceptions.AccessDenied: {'status': 403, 'details': {'Code': 'AccessDenied', 'Message': 'You have no right to access this object because of bucket acl.'}}"""

SHELL = """$ ssh root@47.96.12.8
ssh: connect to host 47.96.12.8 port 22: Connection timed out
$ ping 47.96.12.8
Request timeout for icmp_seq 0"""

ZH = [
    ["您好，我的服务器连不上了", "请提供一下实例ID", "i-bp1abc2def3ghi4"],
    ["我的ECS实例i-bp1abc2def3无法启动，控制台显示Instance status: Stopped", "请稍等，正在为您查询"],
    ["网站打不开，报错 502 Bad Gateway", "请问您用的是Nginx还是Apache？", "Nginx"],
    ["数据库连不上了，日志如下：", LOG, "请检查一下安全组是否放行了3306端口"],
    ["上传文件到OSS的时候报错了", TRACEBACK, "这是Bucket的ACL权限问题，请在控制台修改读写权限"],
    ["ssh登录不上去", SHELL, "请检查安全组22端口是否开放"],
    ["怎么配置 https://help.example.com/docs/ssl 里面说的证书？", "请把证书上传到SLB"],
    ["发票抬头写错了，邮箱是 zhang.wei@example.com", "好的，已为您重新开具"],
    ["为什么扣费了？", "这是上个月的流量费用"],
    ["在吗", "在的，请问有什么可以帮您？", "我想退款"],
    ["AccessKey泄露了怎么办", "请立即在RAM控制台禁用该AccessKey并创建新的"],
    ["我用的是WordPress，升级到PHP 8.1以后白屏了", "请查看一下error.log"],
    [
        "I tried `systemctl restart nginx` but it still fails",
        "请问报错信息是什么？",
        "Job for nginx.service failed because the control process exited with error code.",
        "麻烦执行 nginx -t 看一下配置",
    ],
    ["你好", "您好", "域名解析不生效", "请问域名是什么？", "example.cn"],
    ["备案被驳回了，原因写的是 Website content does not match", "请按照驳回原因修改网站内容后重新提交"],
    ["我们公司用Kubernetes部署的，pod一直CrashLoopBackOff", "请执行kubectl describe pod查看事件"],
    ["CDN回源失败", "请确认源站是否能正常访问"],
    ["Redis连接超时，timeout了", "请检查白名单设置"],
    ["嗯，三台都不行", "好的，我这边帮您提交给技术同事"],
    ["谢谢"],
    ["退款什么时候到账？", "预计3个工作日"],
    ["我想把 Windows Server 2019 换成 Ubuntu 22.04，数据会丢吗？", "更换操作系统会清空系统盘数据，请先备份"],
    ["账号被锁定了", "请问您的账号是？", "mia_li_3668", "已为您解锁"],
    ["控制台一直显示 Loading...", "请清除浏览器缓存后重试", "还是不行"],
    ["Hi，我的 MySQL 实例 CPU 100% 了", "请问是哪个实例？", "rm-bp1xyz0123456789"],
    ["SMTP 发信被拒，返回 550 5.7.1 Message rejected as spam", "请配置 SPF 和 DKIM 记录"],
    ["客服你好，Let's Encrypt 证书续期失败", "请问您用的是 certbot 吗？", "对，certbot renew 报错"],
    ["我的邮件都进了垃圾箱，Gmail和Outlook都是", "请检查DMARC设置"],
    ["Please help 急！！服务器被攻击了", "请问您的实例ID是多少？", "i-bp1abc2def3", "已为您开启DDoS防护"],
    ["实例到期了能续费吗", "可以的，请在费用中心续费"],
    ["好的", "嗯嗯", "收到，谢谢"],
    ["这个是什么意思 The specified key does not exist.", "文件路径不对，请检查 Object 名称"],
    ["扣了两次钱", "请提供一下订单号", "２０２４０５１８０００１"],
    ["我们的 Nginx + PHP-FPM + MySQL 架构跑在 Ubuntu Server 上，Redis Sentinel 偶尔连接超时", "请问 Redis 是自建的还是云数据库？", "自建的"],
    ["Grafana 告警 High Memory Usage on Production Cluster，怎么处理", "请先看一下是哪个进程占用内存"],
]

EN = [
    ["Hi, my instance will not boot", "Could you share the instance ID?", "i-bp1abc2def3"],
    ["We are 杭州星云科技有限公司 and need an invoice for last month's ECS charges", "Sure, I can help with that. What email should the invoice go to?", "finance@example.com"],
    ["The console shows an error in Chinese: 余额不足，请充值后再试. What does that mean?", "It means your balance is insufficient; please top up your account and try again."],
    ["Our Shanghai office (上海办公室) cannot reach the database", "Can you check whether the security group allows port 3306 from that network?", "It does, I checked twice."],
    ["My website is down", "Can you tell me the domain?", "example.com", "Thanks, the DNS record was missing. I have added it back."],
    ["Database connection fails", LOG, "Please check whether port 3306 is open in the security group."],
    ["Upload to OSS fails", TRACEBACK, "The bucket ACL is private; please grant your RAM user read access."],
    ["I can't ssh into my server", SHELL, "Port 22 is closed in your security group. Please add an inbound rule."],
    ["Why was I charged twice?", "I see two orders on your account; I have refunded the duplicate."],
    ["hello", "Hello, how can I help you today?", "I want to cancel my subscription"],
    ["Thanks!", "You're welcome. Have a nice day, Ethan!"],
    ["How do I reset my password?", "Go to the console login page and click Forgot password."],
    ["My company name is 北京某某网络技术有限公司, can you update the invoice title?", "Sure, the invoice title has been updated. Anything else?", "No, that's all, thanks."],
    ["The app shows 网络错误 when I try to log in", "Which version of the app are you using?", "The latest one from the App Store"],
    ["I need help with ICP filing for my domain", "Please prepare your business license and the website owner's ID card."],
    ["Our pods are in CrashLoopBackOff after the upgrade", "Can you run kubectl describe pod and share the events?"],
    ["Email sent to Gmail ends up in spam", "Please add SPF, DKIM and DMARC records for your domain."],
    ["The CDN returns 504 for some files", "Is the origin server reachable from the public internet?", "Yes it is"],
    ["My Redis instance keeps timing out", "Have you added your client IP to the whitelist?", "Oh, I forgot that. Thanks!"],
    ["Can I change the OS from Windows Server 2019 to Ubuntu 22.04 without losing data?", "Changing the OS wipes the system disk, so please back up first."],
    ["My account is locked", "What is your username?", "mia_li_3668", "I have unlocked it."],
    ["The console is stuck on Loading...", "Please clear your browser cache and try again.", "Still not working"],
    ["My MySQL instance is at 100% CPU", "Which instance?", "rm-bp1xyz0123456789"],
    ["SMTP rejects my mail with 550 5.7.1 Message rejected as spam", "Please configure SPF and DKIM."],
    ["Certificate renewal with Let's Encrypt failed", "Are you using certbot?", "Yes, certbot renew fails with a timeout"],
    ["Our customer in China wrote 你好 in the ticket subject, is that a problem for the API?", "No, the API accepts UTF-8 text."],
    ["I was told to contact 客服 but nobody answers the phone", "I'm sorry about that. I can help you here. What is the issue?"],
    ["We deployed to the cn-hangzhou region (华东1) but latency is high from Europe", "You may want a region closer to your users, such as eu-central-1."],
    ["Please help, our server is under attack", "What is your instance ID?", "i-bp1abc2def3", "I have enabled DDoS protection for it."],
    ["Can I renew an expired instance?", "Yes, you can renew it in the billing center within 15 days."],
    ["ok", "thanks", "bye"],
    ["The error says: The specified key does not exist.", "The object path is wrong, please check the key name."],
    ["Our invoice shows the company as 阿里巴巴（中国）有限公司, which is wrong", "Which company name should it show?", "Nimbus Trading Ltd, please."],
    [
        "Hi team, the Chinese name of our company is 深圳市腾飞网络科技有限公司",
        "Thanks, I have updated the company name on your account. Is there anything else?",
    ],
    # Japanese is not Chinese
    ["サーバーに接続できません", "インスタンスIDを教えてください"],
]


@pytest.mark.parametrize("texts", ZH, ids=[f"zh{i}" for i in range(len(ZH))])
def test_chinese_tickets(texts):
    assert detect_language(texts) == "zh"


@pytest.mark.parametrize("texts", EN, ids=[f"en{i}" for i in range(len(EN))])
def test_english_tickets(texts):
    assert detect_language(texts) == "en"


def test_enough_labelled_examples():
    assert len(ZH) >= 30 and len(EN) >= 30


def test_empty_and_letterless_input_is_english():
    assert detect_language([]) == "en"
    assert detect_language(["", "   "]) == "en"
    assert detect_language(["12345", "i-bp1abc2def3", "https://example.com/a/b"]) == "en"
    assert detect_language(iter(["好的"])) == "zh"


def test_urls_emails_ids_and_code_do_not_count_as_english():
    chinese = "服务器连不上"  # 6 Han characters
    noise = [
        "https://very.long.example.com/some/path/with/many/words?and=query&strings=too",
        "someone.with.a.long.name@example-company.com",
        "`systemctl restart some service with many words`",
        "i-bp1abc2def3 vpc-bp1xyz9876543210 sg-bp1abcdefgh12345 0xdeadbeef 3f2a9c1e7b",
        "ECS RDS SLB OSS HTTP HTTPS DNS AccessKey WordPress getUserById",
    ]
    assert detect_language([chinese, *noise]) == "zh"


def test_the_threshold():
    # 9 Han characters against 11 English words is exactly the share
    assert HAN_SHARE == 0.45
    words = "please help me with this one thing that does not work".split()
    assert len(words) == 11
    assert detect_language(["服务器连不上怎么办", " ".join(words)]) == "zh"
    assert detect_language(["服务器连不上怎么办", " ".join(words) + " today"]) == "en"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("zh", "zh"), ("zh-CN", "zh"), ("zh_cn", "zh"), ("zh-Hans", "zh"), ("zh-Hant-TW", "zh"), ("cmn", "zh"),
        ("ZH", "zh"), ("zho", "zh"), ("en", "en"), ("en-US", "en"), ("en_GB", "en"), ("EN", "en"),
        ("fr", "fr"), ("fr-FR", "fr-fr"), ("DE", "de"), (" ja ", "ja"),
    ],
)
def test_normalize_language(code, expected):
    assert normalize_language(code) == expected


def _ticket(language: str, *events: Event) -> Ticket:
    return Ticket("T-1", list(events), SourceRef("t.jsonl", line=1), language=language)


def test_ticket_language_given_or_detected():
    chinese = _ticket(
        "en",
        Event("system", "客服小王已接入"),
        Event("customer", "我的网站打不开了"),
        Event("tool_call", call_id="c1", name="lookup_site", arguments={"domain": "example.com is a long english text"}),
        Event("tool_result", call_id="c1", content="The site is down because the certificate expired last night"),
        Event("agent", "证书过期了，请续期"),
    )
    assert ticket_language(chinese, given=True) == "en"
    assert ticket_language(chinese, given=False) == "zh"
    english = _ticket("zh-CN", Event("customer", "My site is down"), Event("agent", "Your certificate expired."))
    assert ticket_language(english, given=True) == "zh"
    assert ticket_language(english, given=False) == "en"
    assert ticket_language(_ticket("en-US"), given=True) == "en"
    assert ticket_language(_ticket("fr-FR"), given=True) == "fr-fr"
    # a blank given language is detected
    assert ticket_language(_ticket("", Event("customer", "您好，在吗")), given=True) == "zh"
    assert ticket_language(_ticket("en"), given=False) == "en"


def test_system_text_counts():
    ticket = _ticket("en", Event("system", "用户已接入，工单已创建"), Event("customer", "hi"))
    assert ticket_language(ticket, given=False) == "zh"
