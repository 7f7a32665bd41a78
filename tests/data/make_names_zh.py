"""Generate tests/data/names_heldout_zh.jsonl: Chinese customer-service
utterances with person names (gold character spans) and without them.

Written apart from the recognizers' rules (issue 25 item 3): the sentence
templates below were written before reading the cue lists in
cirrus/ingest/deid/zh.py, and the names come from Faker's zh_CN and zh_TW
providers, not from the recognizers' surname tables.  Every template belongs
to one split, drawn with a fixed seed within each position, so the
``heldout`` utterances use sentence shapes that the ``tune`` ones never show
(tune on ``tune``; report ``heldout``).

    .venv/bin/python tests/data/make_names_zh.py          # rewrite the set
    .venv/bin/python tests/data/make_names_zh.py --check  # exit 1 if it differs

Each line: {"id", "split", "position", "template", "text", "names":
[{"start", "end", "value"}]}; ``position`` is where the name stands (alone,
ack, address, id, role, signoff, nocue) or ``none`` for an utterance with no
name but with words a name finder may take for one (brands, districts,
platforms, Latin product words, words that begin with a surname character).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from faker import Faker

OUT = Path(__file__).with_name("names_heldout_zh.jsonl")
SEED = 20250325
PER_TEMPLATE = 4          # utterances per name template
PER_NEGATIVE = 3          # utterances per no-name template

# {n}, {n2}: names; {addr}: a Faker zh_CN address; {oid}: an order number; {mid}: a member number;
# {tid}: a ticket number; {phone}: a mobile number; {badge}: a staff badge number
NAMED: dict[str, list[str]] = {
    "alone": ["{n}", "{n}。", "{n}\n", " {n} ", "{n}！", "{n}~", "{n}（本人）", "{n}，"],
    "ack": ["好的，{n}", "好的{n}，我这就去查", "收到，{n}。", "谢谢{n}！", "嗯嗯，{n}您稍等",
            "明白了{n}", "辛苦了{n}", "OK {n}，没问题"],
    "address": ["{addr} {n}", "{addr}，{n}", "地址是{addr}，{n}收", "寄到{addr} {n} {phone}",
                "{addr}（{n}）", "新地址：{addr}\n{n}", "{addr}/{n}/{phone}", "送到{addr}，找{n}就行"],
    "id": ["订单{oid} {n}", "{oid}，{n}", "单号{oid}是{n}下的", "会员号{mid} {n}", "工单#{tid} {n}",
           "{oid}/{n}", "退款单{oid}（{n}）", "{mid} {n} 要改手机号"],
    "role": ["客服经理：{n}", "售后专员{n}为您处理", "值班主管 {n}", "技术支持-{n}", "店长{n}说可以退",
             "我们的配送员{n}明天上门", "区域经理{n}已经批了", "质检组长{n}会回电"],
    "signoff": ["感谢您的耐心等待。——{n}", "祝您生活愉快！客服{n}", "如还有疑问可以回复本消息，{n}敬上",
                "此致\n{n}", "【{n}】很高兴为您服务", "工号{badge} {n} 为您服务", "有事随时找我，我是{n}",
                "本次服务由{n}提供，请给五星好评哦"],
    "nocue": ["{n}说明天再来取", "昨天{n}已经帮我退过一次了", "麻烦转告{n}一下", "这个单子是{n}下的单",
              "{n}和{n2}都没收到货", "上次跟{n}聊过这个问题", "我替{n}问一下进度", "东西放{n}那儿了"],
}

NEGATIVE = [
    "请问{platform}上的{product}还有货吗", "我在{district}，能送到吗", "{brand}的旗舰店说要{days}天发货",
    "{product} Dance版和Pro版有什么区别", "我在{platform}下的单，{platform2}也有同款", "你们这个办法很高明",
    "{district}{road}附近有门店吗", "王者荣耀的点券充值失败了", "周末能不能安排送货", "马上帮您处理，请稍等",
    "黄金会员的权益在哪里看", "金额不对，多扣了{days}元", "安全中心提示异常登录", "白天没人在家，晚上送可以吗",
    "我想买{brand}的{product}", "{product} Air和{product} Mini的尺寸一样吗", "程序一直闪退，重装也没用",
    "钱包余额显示为0", "文档里的宋体显示不正常", "常规快递几天到{district}", "江小白的礼盒还有吗",
    "周大福的金条可以退吗", "李宁的跑鞋尺码偏大吗", "康师傅红烧牛肉面缺货了", "于是我又重新下单了",
    "申通快递一直没更新物流", "华为Mate60 Pro的屏幕坏了", "小米SU7的定金能退吗", "小红书上说你们有优惠券",
    "Dance模式怎么关掉", "{brand}和{brand2}哪个好", "温度调到26度还是很冷", "田园风的窗帘有现货吗",
    "高铁上收不到验证码", "夏天的新款什么时候上", "明天上午能到{district}吗", "包邮吗？运费险有没有",
    "史上最差的购物体验", "白象方便面是临期的", "金龙鱼的油漏了",
]

PLATFORMS = ["微博", "淘宝", "京东", "拼多多", "抖音", "小红书", "微信", "支付宝", "美团", "饿了么", "闲鱼", "天猫"]
PRODUCTS = ["小米手环", "iPhone 15", "AirPods", "戴森吹风机", "美的空调", "格力风扇", "华为平板", "罗技鼠标",
            "Switch", "Kindle", "飞利浦剃须刀", "九阳豆浆机"]
BRANDS = ["王老吉", "李宁", "周大福", "张小泉", "康师傅", "老干妈", "海尔", "万达", "马应龙", "钟薛高", "白象",
          "金龙鱼", "安踏", "百雀羚", "黄天鹅"]
DISTRICTS = ["朝阳区", "海淀区", "黄浦区", "天河区", "南山区", "武侯区", "江宁区", "高新区", "西湖区",
             "福田区", "鼓楼区", "宝安区"]
ROADS = ["建国路", "中山路", "人民路", "解放大道", "长安街", "南京东路", "文三路"]


def _fill(template: str, fake: dict[str, Faker], rng: random.Random) -> tuple[str, list[dict]]:
    values = {
        "addr": fake["zh_CN"].address().replace("\n", " "),
        "oid": str(rng.randrange(10**15, 10**16)),
        "mid": "VIP" + str(rng.randrange(10**7, 10**8)),
        "tid": str(rng.randrange(10**5, 10**6)),
        "phone": fake["zh_CN"].phone_number(),
        "badge": str(rng.randrange(1000, 9999)),
        "platform": rng.choice(PLATFORMS), "platform2": rng.choice(PLATFORMS),
        "product": rng.choice(PRODUCTS), "brand": rng.choice(BRANDS), "brand2": rng.choice(BRANDS),
        "district": rng.choice(DISTRICTS), "road": rng.choice(ROADS), "days": str(rng.randrange(2, 30)),
    }
    for key in ("n", "n2"):
        locale = "zh_TW" if rng.random() < 0.25 else "zh_CN"
        values[key] = fake[locale].name()
    while values["n2"] == values["n"]:
        values["n2"] = fake["zh_CN"].name()
    text, names, i = "", [], 0
    while i < len(template):
        if template[i] == "{":
            key = template[i + 1:template.index("}", i)]
            if key in ("n", "n2"):
                names.append({"start": len(text), "end": len(text) + len(values[key]), "value": values[key]})
            text += values[key]
            i = template.index("}", i) + 1
        else:
            text += template[i]
            i += 1
    return text, names


def build() -> list[dict]:
    rng = random.Random(SEED)
    fake = {loc: Faker(loc) for loc in ("zh_CN", "zh_TW")}
    fake["zh_CN"].seed_instance(SEED)
    fake["zh_TW"].seed_instance(SEED + 1)
    rows, seen = [], set()
    groups = [(pos, templates, PER_TEMPLATE) for pos, templates in NAMED.items()]
    groups.append(("none", NEGATIVE, PER_NEGATIVE))
    for position, templates, count in groups:
        order = list(range(len(templates)))
        rng.shuffle(order)
        heldout = set(order[: len(order) // 2])
        for t, template in enumerate(templates):
            made, wanted = 0, count if "{" in template else 1   # a fixed sentence: once is enough
            while made < wanted:
                text, names = _fill(template, fake, rng)
                if text in seen:
                    continue
                seen.add(text)
                rows.append({"id": f"{position}-{t:02d}-{made}", "split": "heldout" if t in heldout else "tune",
                             "position": position, "template": t, "text": text, "names": names})
                made += 1
    return rows


def render(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows)


def main(argv: list[str]) -> int:
    text = render(build())
    if "--check" in argv:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        print("up to date" if same else f"{OUT.name} differs from what the generator makes")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({text.count(chr(10))} utterances)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
