"""Generate ``tests/data/pii_zh.json``: a labelled Chinese PII evaluation set.

Run it as ``.venv/bin/python tests/data/make_pii_zh.py [--out PATH]``.

The set is written by this script from our own customer-service templates
(hotel booking, e-commerce delivery and returns, cloud-service support,
telecom, airline, bank) filled with synthetic values: Chinese names,
addresses and e-mail user names come from Faker's ``zh_CN`` providers, the
structured identifiers (resident ids with a correct ISO 7064 MOD 11-2 check
character, Luhn-valid UnionPay cards, passports, plates, phone numbers) are
built here.  Nothing refers to a real person.

Output format (presidio-research): a JSON list of
``{"full_text": str, "spans": [{"entity_type", "entity_value",
"start_position", "end_position"}]}`` with ``end_position`` exclusive, one
item per line so that a diff stays readable.

Determinism: every random choice is drawn from ``Faker.seed(SEED)`` (Faker's
shared generator) and one ``random.Random(SEED)``, in a fixed order, so a
re-run reproduces the file byte for byte (for the Faker version locked in
``uv.lock``; a Faker upgrade that changes its word lists changes the file,
and ``tests/test_pii_zh_data.py`` then says so).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import re
import string
from collections.abc import Callable
from pathlib import Path

from faker import Faker

SEED = 20240611
REPEAT_PII = 5  # each PII template is filled this many times
REPEAT_EMPTY = 3  # each no-PII (trap) template with fillers is filled this many times (a fixed one once)
OUT = Path(__file__).with_name("pii_zh.json")

# ---------------------------------------------------------------------------
# value lists (our own)
# ---------------------------------------------------------------------------
COMPOUND_SURNAMES = ["欧阳", "司马", "上官", "诸葛", "东方", "慕容", "令狐", "皇甫", "公孙", "夏侯", "尉迟", "端木"]
GIVEN_CHARS = list("娜婷雪明轩浩宇晨静敏磊洋欣悦涵一子若博文嘉怡晓云飞燕琳瑶峰杰琪睿安然诗雨懿清风")
MUNICIPALITIES = {"北京市", "上海市", "天津市", "重庆市"}
SKIP_PROVINCES = {"台湾省", "香港特别行政区", "澳门特别行政区"}
NOT_PREFECTURES = {"北京", "上海", "天津", "重庆", "香港", "澳门", "台北"}  # not "<province>X市" cities
ROAD_SUFFIXES = ["路", "街", "大道", "大街", "东路", "西路", "中路", "南路", "北路", "巷"]
ESTATE_WORDS = ["阳光", "锦绣", "翠苑", "金色", "碧水", "紫荆", "梧桐", "云栖", "春江", "绿城", "万科", "星河", "滨江", "嘉禾"]
ESTATE_SUFFIXES = ["小区", "花园", "家园", "苑", "新村", "公寓", "名邸"]
TOWER_SUFFIXES = ["大厦", "中心", "广场", "国际", "科技园", "商务楼"]
ID_AREAS = [
    "110101", "110105", "110108", "120104", "130102", "130602", "140105", "210102", "210202", "220102",
    "230103", "310101", "310104", "310115", "320102", "320106", "320506", "330102", "330106", "330204",
    "340104", "350102", "350203", "360102", "370102", "370202", "410105", "420106", "420111", "430104",
    "430105", "440104", "440106", "440305", "440306", "450103", "460106", "500103", "500106", "510104",
    "510107", "520102", "530102", "610113", "620102", "630104", "640104", "650102",
]
PLATE_PROVINCES = "京津沪渝冀豫云辽黑湘皖鲁新苏浙赣鄂桂甘晋蒙陕吉闽贵粤青藏川宁琼"
PLATE_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXY"
MOBILE_PREFIXES = ["130", "131", "132", "133", "135", "136", "137", "138", "139", "145", "147", "150", "151",
                   "152", "153", "155", "156", "157", "158", "159", "166", "173", "176", "177", "178", "180",
                   "181", "182", "183", "185", "186", "187", "188", "189", "191", "198", "199"]
AREA_CODES = ["010", "020", "021", "022", "023", "024", "025", "027", "028", "029", "0571", "0574", "0512",
              "0510", "0755", "0591", "0531", "0532", "0371", "0731", "0851", "0871", "0769", "0757"]
CARD_BINS = ["622202", "622848", "621700", "622588", "621226", "622700", "623058", "625965", "628288",
             "622260", "621483", "622262", "620522", "621661", "625807"]
EMAIL_DOMAINS = ["163.com", "126.com", "qq.com", "sina.com", "sohu.com", "foxmail.com", "aliyun.com",
                 "139.com", "yeah.net", "gmail.com", "outlook.com", "hotmail.com", "189.cn", "vip.163.com"]
REGIONS = ["华东1（杭州）", "华东2（上海）", "华北2（北京）", "华北3（张家口）", "华南1（深圳）", "西南1（成都）",
           "中国香港", "新加坡"]
HOTEL_BRANDS = ["全季酒店", "汉庭酒店", "亚朵酒店", "如家酒店", "希尔顿欢朋酒店", "维也纳酒店", "丽枫酒店", "桔子水晶酒店"]
HOTEL_BRANCHES = ["火车站", "西湖", "国贸", "万达广场", "机场", "会展中心", "人民广场", "高新区"]
ROOMS = ["高级大床房", "豪华双床房", "行政套房", "高档型大床房", "家庭房", "商务大床房", "钟点房", "亲子房"]
PRODUCTS = ["小米14 Pro 12GB+256GB", "iPhone 15 128GB", "戴森吹风机HD15", "华为MatePad 11.5", "九阳豆浆机",
            "美的电饭煲4L", "罗技无线鼠标M330", "安踏跑鞋", "格力空调1.5匹", "雅诗兰黛小棕瓶50ml",
            "康师傅红烧牛肉面整箱", "小天鹅滚筒洗衣机10kg"]
BANKS = ["招商银行", "工商银行", "建设银行", "农业银行", "中国银行", "交通银行", "浦发银行", "兴业银行", "中信银行"]
HOTLINES = ["400-820-8820", "95588", "10086", "10010", "10000", "95533", "95555", "95566", "95599",
            "400-800-1234", "95187", "400-100-5678"]
AIRLINES = ["CA", "MU", "CZ", "HU", "3U", "ZH", "MF", "SC", "9C", "HO"]
TRACKING_PREFIXES = ["SF", "YT", "JT", "JD00", "ZTO", "YD"]
ROUTERS = ["AX3000", "WS5200", "TL-XDR5430", "AX6000", "BE3600"]


def luhn_check_digit(body: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:  # these positions are doubled once the check digit is appended
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return str((10 - total % 10) % 10)


def id_check_char(first17: str) -> str:
    """ISO 7064 MOD 11-2 check character of a mainland resident id."""
    weights = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2]
    return "10X98765432"[sum(int(c) * w for c, w in zip(first17, weights)) % 11]


class Filler:
    """Draws every value; the order of draws is fixed by the template order."""

    def __init__(self, seed: int) -> None:
        Faker.seed(seed)
        self.fake = Faker("zh_CN")
        self.rng = random.Random(seed)

    # -- helpers ---------------------------------------------------------
    def digits(self, n: int) -> str:
        return "".join(self.rng.choice(string.digits) for _ in range(n))

    def pick(self, seq):
        return self.rng.choice(seq)

    # -- PERSON ----------------------------------------------------------
    def person(self, kind: str = "any") -> tuple[str, str]:
        """(surname, full name)."""
        fake, rng = self.fake, self.rng
        if kind == "male":
            sur = fake.last_name()
            return sur, sur + fake.first_name_male()
        if kind == "female":
            sur = fake.last_name()
            return sur, sur + fake.first_name_female()
        if rng.random() < 0.22:
            sur = rng.choice(COMPOUND_SURNAMES)
            if rng.random() < 0.2:
                given = rng.choice(GIVEN_CHARS) * 2
            else:
                given = "".join(rng.choice(GIVEN_CHARS) for _ in range(rng.choice((1, 2))))
            return sur, sur + given
        full = fake.name()
        sur = full[:2] if full[:2] in COMPOUND_SURNAMES else full[0]
        return sur, full

    # -- STREET_ADDRESS --------------------------------------------------
    def _province_city(self) -> str:
        province = self.fake.province()
        while province in SKIP_PROVINCES:
            province = self.fake.province()
        if province in MUNICIPALITIES:
            return province
        return province + self._city()

    def _city(self) -> str:
        city = self.fake.city_name()
        while city in NOT_PREFECTURES:
            city = self.fake.city_name()
        return city + "市"

    def _road(self) -> str:
        if self.rng.random() < 0.5:
            return self.fake.street_name()
        return self.fake.city_name() + self.rng.choice(ROAD_SUFFIXES)

    def address(self) -> str:
        fake, rng = self.fake, self.rng
        form = rng.randrange(6)
        district = fake.district() + rng.choice(["区", "区", "区", "县"])
        if form == 0:  # province/city/district + road + number + building/unit/room
            tail = rng.choice([
                f"{rng.randint(1, 30)}栋{rng.randint(1, 6)}单元{rng.randint(1, 32)}{rng.randint(1, 4):02d}室",
                f"{rng.randint(1, 20)}号楼{rng.randint(1, 28)}{rng.randint(1, 6):02d}",
                f"{rng.randint(2, 30)}层",
                "",
            ])
            return f"{self._province_city()}{district}{self._road()}{rng.randint(1, 999)}号{tail}"
        if form == 1:  # residential estate
            estate = rng.choice(ESTATE_WORDS) + rng.choice(ESTATE_SUFFIXES)
            return (f"{self._province_city()}{district}{estate}{rng.randint(1, 30)}栋{rng.randint(1, 4)}单元"
                    f"{rng.randint(1, 33)}{rng.randint(1, 4):02d}室")
        if form == 2:  # office tower
            tower = fake.city_name() + rng.choice(TOWER_SUFFIXES)
            floor = rng.randint(2, 40)
            block = fake.building_number().upper() if rng.random() < 0.4 else ""
            return (f"{self._province_city()}{district}{self._road()}{rng.randint(1, 600)}号{tower}{block}"
                    f"{floor}层{floor}{rng.randint(1, 20):02d}")
        if form == 3:  # garden + building number, city-level start
            estate = rng.choice(ESTATE_WORDS) + "花园"
            return (f"{self._city()}{district}{estate}{rng.randint(1, 20)}号楼{rng.randint(1, 3)}单元"
                    f"{rng.randint(1, 18)}{rng.randint(1, 4):02d}")
        if form == 4:  # short: city + road + number
            return f"{self._city()}{self._road()}{rng.randint(1, 999)}号"
        # district + estate without province
        estate = rng.choice(ESTATE_WORDS) + rng.choice(ESTATE_SUFFIXES)
        return (f"{self._city()}{district}{self._road()}{rng.randint(1, 500)}号{estate}"
                f"{rng.randint(1, 30)}幢{rng.randint(101, 2804)}室")

    # -- CN_LICENSE_PLATE ------------------------------------------------
    def plate(self) -> str:
        rng = self.rng
        prov = rng.choice(PLATE_PROVINCES)
        letter = rng.choice(PLATE_LETTERS)
        if rng.random() < 0.25:  # new energy: D/F + 5 characters
            second = rng.choice(PLATE_LETTERS) if rng.random() < 0.3 else self.digits(1)
            body = rng.choice("DF") + second + self.digits(4)
        else:
            chars = [rng.choice(string.digits) for _ in range(5)]
            for _ in range(rng.choice((0, 0, 1, 2))):
                chars[rng.randrange(5)] = rng.choice(PLATE_LETTERS)
            body = "".join(chars)
        sep = rng.choice(["·", "·", "", "", " "])
        return f"{prov}{letter}{sep}{body}"

    # -- CN_RESIDENT_ID --------------------------------------------------
    def resident_id(self) -> str:
        rng = self.rng
        area = rng.choice(ID_AREAS)
        start, end = dt.date(1950, 1, 1).toordinal(), dt.date(2005, 12, 31).toordinal()
        birth = dt.date.fromordinal(rng.randint(start, end)).strftime("%Y%m%d")
        want_x = rng.random() < 0.18
        while True:
            seq = self.digits(3)
            check = id_check_char(area + birth + seq)
            if not want_x or check == "X":
                break
        number = area + birth + seq + check
        form = rng.random()
        if form < 0.2:
            return f"{number[:6]} {number[6:14]} {number[14:]}"
        if form < 0.32:
            return f"{number[:6]}-{number[6:14]}-{number[14:]}"
        return number

    # -- PASSPORT_NUMBER -------------------------------------------------
    def passport(self) -> str:
        r = self.rng.random()
        if r < 0.5:
            return "E" + self.digits(8)
        if r < 0.8:
            return "E" + self.rng.choice(PLATE_LETTERS) + self.digits(7)
        return "G" + self.digits(8)

    # -- PHONE_NUMBER ----------------------------------------------------
    def mobile(self) -> str:
        rng = self.rng
        p, a, b = rng.choice(MOBILE_PREFIXES), self.digits(4), self.digits(4)
        form = rng.random()
        if form < 0.5:
            return p + a + b
        if form < 0.65:
            return f"{p} {a} {b}"
        if form < 0.8:
            return f"{p}-{a}-{b}"
        if form < 0.9:
            return f"+86 {p}{a}{b}"
        if form < 0.95:
            return f"+86 {p} {a} {b}"
        return f"+86-{p}{a}{b}"

    def landline(self) -> str:
        rng = self.rng
        code = rng.choice(AREA_CODES)
        local = str(rng.randint(2, 8)) + self.digits(7)
        form = rng.random()
        if form < 0.55:
            number = f"{code}-{local}"
        elif form < 0.72:
            number = f"({code}){local}"
        elif form < 0.85:
            number = f"（{code}）{local}"
        else:
            number = f"{code} {local}"
        if rng.random() < 0.25:
            number += "转" + self.digits(rng.randint(2, 4))
        return number

    def phone(self) -> str:
        return self.mobile() if self.rng.random() < 0.65 else self.landline()

    # -- CREDIT_CARD -----------------------------------------------------
    def card(self) -> str:
        rng = self.rng
        length = rng.choice([16, 16, 16, 19, 19, 17, 18])
        bin_ = rng.choice(CARD_BINS)
        body = bin_ + self.digits(length - len(bin_) - 1)
        number = body + luhn_check_digit(body)
        form = rng.random()
        if form < 0.5:
            return number
        groups = [number[i:i + 4] for i in range(0, len(number), 4)]
        return (" " if form < 0.8 else "-").join(groups)

    # -- EMAIL_ADDRESS ---------------------------------------------------
    def email(self) -> str:
        fake, rng = self.fake, self.rng
        form = rng.random()
        if form < 0.35:
            local = fake.user_name()
        elif form < 0.65:
            pinyin = (fake.last_romanized_name() + fake.first_romanized_name()).lower()
            local = pinyin + rng.choice(["_", "", "."]) + self.digits(rng.randint(2, 4))
        elif form < 0.8:
            local = str(rng.randint(10000, 9999999999))
            return f"{local}@qq.com"
        else:
            local = fake.first_romanized_name().lower() + "." + fake.last_romanized_name().lower()
        return f"{local}@{rng.choice(EMAIL_DOMAINS)}"

    # -- unlabelled fillers ----------------------------------------------
    def order_no(self) -> str:
        d = dt.date(2023, 1, 1) + dt.timedelta(days=self.rng.randrange(700))
        return d.strftime("%Y%m%d") + f"{self.rng.randint(0, 23):02d}{self.rng.randint(0, 59):02d}" + self.digits(6)

    def date(self) -> str:
        d = dt.date(2024, 1, 1) + dt.timedelta(days=self.rng.randrange(400))
        return self.rng.choice([f"{d.month}月{d.day}日", d.isoformat(), f"{d.year}年{d.month}月{d.day}日"])

    def time(self) -> str:
        return f"{self.rng.randint(6, 22):02d}:{self.rng.choice(['00', '15', '30', '45'])}"

    def amount(self) -> str:
        if self.rng.random() < 0.5:
            return str(self.rng.randint(5, 3000))
        return f"{self.rng.randint(5, 9999)}.{self.rng.choice(['00', '50', '90', '99'])}"

    def instance(self) -> str:
        alnum = string.ascii_lowercase + string.digits
        return "i-" + self.rng.choice(["bp1", "uf6", "2ze", "wz9", "m5e", "8vb"]) + "".join(
            self.rng.choice(alnum) for _ in range(17))

    def tracking(self) -> str:
        return self.rng.choice(TRACKING_PREFIXES) + self.digits(12)

    def flight(self) -> str:
        return self.rng.choice(AIRLINES) + str(self.rng.randint(101, 9899))

    def fillers(self) -> dict[str, Callable[[], str]]:
        rng, fake = self.rng, self.fake
        return {
            "order": self.order_no,
            "date": self.date,
            "time": self.time,
            "amount": self.amount,
            "instance": self.instance,
            "tracking": self.tracking,
            "flight": self.flight,
            "city": fake.city_name,
            "region": lambda: rng.choice(REGIONS),
            "hotel": lambda: f"{rng.choice(HOTEL_BRANDS)}（{fake.city_name()}{rng.choice(HOTEL_BRANCHES)}店）",
            "room": lambda: rng.choice(ROOMS),
            "product": lambda: rng.choice(PRODUCTS),
            "bank": lambda: rng.choice(BANKS),
            "hotline": lambda: rng.choice(HOTLINES),
            "ticket": lambda: "T" + self.digits(12),
            "seat": lambda: f"{rng.randint(1, 60)}{rng.choice('ABCDEFJK')}",
            "version": lambda: f"v{rng.randint(1, 5)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}",
            "n": lambda: str(rng.randint(2, 100)),
            "router": lambda: rng.choice(ROUTERS),
        }


# ---------------------------------------------------------------------------
# templates: ${UPPER} is a labelled entity, ${lower} an unlabelled filler.
#   PERSON   a new person (uses the surname of a preceding ${SURNAME})
#   PERSON2  a second, different person;  SAME  the last person again
#   MALE / FEMALE  a full name for 先生 / 女士;  SURNAME  the surname alone
#   ADDR PLATE ID PASSPORT PHONE MOBILE LANDLINE CARD EMAIL
# ---------------------------------------------------------------------------
PII_TEMPLATES = [
    # ---- hotel booking ----
    "您好，我想订${date}入住的${room}，入住人是${PERSON}，手机${MOBILE}。",
    "${PERSON}您好，您预订的${hotel}${room}已确认，订单号${order}，请于${date}14:00后办理入住。",
    "入住人是${PERSON}和${PERSON2}，两间${room}，麻烦备注一下要无烟楼层，谢谢。",
    "我是${PERSON}，上周在你们酒店住过两晚，电子发票发到${EMAIL}，谢谢。",
    "尊敬的${PERSON}，您在${hotel}的钟点房订单已取消，退款${amount}元将在3-5个工作日原路退回。",
    "前台登记需要证件，入住人${PERSON}，身份证号${ID}，麻烦提前录入。",
    "客人${FEMALE}女士要求加一张床，联系电话${PHONE}，请前台跟进。",
    "我开车过去，车牌${PLATE}，酒店有地下停车位吗？要不要提前登记？",
    "免贵姓${SURNAME}，叫${PERSON}，订的是${date}的${room}，能不能提前到中午入住？",
    "同事是用护照登记的，护照号${PASSPORT}，姓名${PERSON}，麻烦核对一下。",
    '预订信息：{"入住人": "${PERSON}", "手机": "${MOBILE}", "房型": "${room}", "到店日期": "${date}"}',
    "住宿发票请寄到${ADDR}，收件人${PERSON}，电话${MOBILE}。",
    "已为${MALE}先生保留${room}至当晚18:00，如需延迟到店请致电${hotline}。",
    "我是用${bank}信用卡担保的，卡号${CARD}，现在想取消担保。",
    "您好，${PERSON}，您的黄金会员积分已到账，可抵扣下次房费。",
    "访客车辆${PLATE}已登记，${PERSON}先生入住期间可免费停车。",
    "客户：我叫${PERSON}，订单${order}能不能改成两晚？\n客服：${SAME}您好，已为您修改，房费差价${amount}元。",
    "连住三晚的发票抬头写个人就行，发我邮箱${EMAIL}吧。",
    "酒店停车场的车${PLATE}挡住出口了，麻烦前台联系一下车主。",
    "押金${amount}元请退到原卡${CARD}，持卡人${PERSON}。",
    # ---- e-commerce delivery & returns ----
    "收件人写${PERSON}，电话${MOBILE}，地址${ADDR}。",
    "收件人是${PERSON}，收货地址改成${ADDR}，麻烦发货前帮我改一下。",
    "亲，${PERSON}您好，您的订单${order}已发货，快递单号${tracking}，预计${date}送达。",
    "上门取件地址：${ADDR}，联系人${PERSON}，${MOBILE}，周末都在家。",
    "快递员打我电话${PHONE}一直没人接，我白天在公司，能不能改派到${ADDR}？",
    '工具返回：{"order_id": "${order}", "收件人": "${PERSON}", "手机": "${MOBILE}", "地址": "${ADDR}", "状态": "已签收"}',
    "我叫${PERSON}，买的${product}屏幕有划痕，想换货，怎么操作？",
    "退款退到哪张卡？我绑定的是${CARD}，${bank}的。",
    "开个普通发票，抬头个人，发送邮箱${EMAIL}，订单号${order}。",
    "发我邮箱${EMAIL}吧，附件太大微信发不了。",
    "电子发票发到${EMAIL}，谢谢。",
    "${FEMALE}女士您好，您申请的仅退款已通过，${amount}元将退回原支付账户。",
    "快递显示已签收，可我没收到，我是收件人${PERSON}，电话${MOBILE}。",
    "您好，${PERSON}，麻烦核对一下收货信息：${ADDR}，${MOBILE}，无误请回复确认。",
    "退货寄回时请在包裹里写上订单号和联系人${PERSON}，手机${MOBILE}。",
    "买给我爸的，收件人${PERSON}，地址${ADDR}，送货前请先打${PHONE}。",
    '物流接口返回 {"receiver": "${PERSON}", "phone": "${MOBILE}", "address": "${ADDR}"}，派送中。',
    "尊敬的${PERSON}，您购买的${product}已到${city}分拣中心，请保持电话${MOBILE}畅通。",
    "汽车脚垫订单备注车型和车牌：${PLATE}，收件人${PERSON}。",
    "客户：您好，我是${PERSON}。\n客服：您好，${SAME}，请问订单${order}有什么问题？",
    "投诉一下，${city}的快递员态度很差，我的联系方式是${PHONE}，邮箱${EMAIL}。",
    "换货地址写${ADDR}，收货人${PERSON}。",
    # ---- cloud-service support ----
    "我的ECS实例${instance}在${region}连不上了，我是账号主体${PERSON}，电话${PHONE}。",
    "实名认证一直审核不通过，身份证号${ID}，姓名${PERSON}，请帮忙看看。",
    "备案负责人${PERSON}，手机${MOBILE}，邮箱${EMAIL}，证件号${ID}。",
    "发票邮寄地址填的是${ADDR}，收件人${PERSON}，发票还没收到。",
    "尊敬的${PERSON}，您的实例${instance}将于${date}到期，请及时续费以免影响业务。",
    "企业认证经办人${PERSON}，经办人身份证${ID}，联系电话${LANDLINE}。",
    "告警通知发到${EMAIL}和短信${MOBILE}，安全组规则我已经放行了80端口。",
    "账号绑定的邮箱${EMAIL}已经不用了，想改成手机${MOBILE}接收验证码。",
    "您好，${PERSON}，备案初审已通过，管局审核一般需要5-20个工作日。",
    "工单${ticket}：客户${PERSON}反馈${region}的实例${instance}磁盘IO过高，联系方式${MOBILE}。",
    "我们公司财务的座机是${LANDLINE}，增值税专用发票请寄到${ADDR}。",
    "用${bank}的卡${CARD}充值了${amount}元，余额一直没有变化。",
    "备案幕布邮寄地址：${ADDR}，收件人${PERSON}，电话${MOBILE}。",
    "网站负责人变更为${PERSON}，身份证${ID}，手机${MOBILE}，麻烦更新备案信息。",
    "个人实名认证用的是护照，护照号${PASSPORT}，姓名${PERSON}。",
    "发票抬头是公司，接收邮箱${EMAIL}，开票金额${amount}元。",
    "控制台显示绑定的手机号是${MOBILE}，我已经换号了，新号码${MOBILE}。",
    "自动续费扣款卡${CARD}，扣款失败了，帮我看看什么原因。",
    "技术联系人：${PERSON}，${PHONE}，${EMAIL}。",
    '账号信息 {"实名主体": "${PERSON}", "证件号": "${ID}", "认证状态": "已认证", "地域": "${region}"}',
    # ---- telecom ----
    "我是机主${PERSON}，号码${MOBILE}，想把流量包改成30GB的。",
    "办理宽带，装机地址${ADDR}，联系人${PERSON}，${PHONE}。",
    "补办SIM卡需要核实身份，请提供机主身份证号码。——好的，${ID}。",
    "${PERSON}您好，您的号码${MOBILE}话费余额不足${amount}元，请及时充值。",
    "帮我查一下${MOBILE}的套餐，我周一办的副卡还没生效。",
    "宽带师傅说明天上午上门，我家在${ADDR}，白天家里有人。",
    "自动扣费绑定的银行卡是${CARD}，持卡人${PERSON}，能改成微信支付吗？",
    "固话${LANDLINE}一直有杂音，报修过两次了。",
    "携号转网需要核对机主信息：${PERSON}，证件号码${ID}。",
    "家里座机${LANDLINE}和手机${MOBILE}办的是融合套餐，能拆开吗？",
    "客户：我叫${PERSON}，手机${MOBILE}停机了。\n客服：${SAME}您好，需要先补缴欠费${amount}元。",
    "话费电子账单请发到${EMAIL}，机主${PERSON}。",
    "免贵姓${SURNAME}，${PERSON}，装机地址是${ADDR}。",
    "外籍员工办卡用护照${PASSPORT}，联系电话${PHONE}。",
    # ---- airline ----
    "乘机人${PERSON}，身份证${ID}，航班${flight}，${date}出发。",
    "乘机人是${PERSON}，护照号${PASSPORT}，想改签到明天同一航班。",
    "国际航班需要护照：${PERSON}，${PASSPORT}，有效期到2031年。",
    "${MALE}先生您好，您的${flight}航班延误，已为您改签，新的登机时间是${time}。",
    "行程单请发到${EMAIL}，乘机人${PERSON}。",
    "联系人${PERSON}，手机${MOBILE}，出票后请短信通知。",
    "我和女儿一起飞，乘机人${PERSON}、${PERSON2}，儿童票用的是护照${PASSPORT}。",
    "尊敬的${PERSON}旅客，您已成功值机，座位号${seat}，请于${time}前到达登机口。",
    "接机车辆车牌${PLATE}，司机会在到达层等您，司机电话${MOBILE}。",
    "退票款退回原卡${CARD}，持卡人${PERSON}。",
    "护照换新了，旧护照${PASSPORT}，新护照${PASSPORT}，常旅客信息要更新。",
    "行李丢了，找到后请寄到${ADDR}，联系人${PERSON}，电话${PHONE}。",
    "免贵姓${SURNAME}，叫${PERSON}，护照${PASSPORT}，${flight}航班能选靠窗座位吗？",
    '旅客信息 {"乘机人": "${PERSON}", "证件类型": "护照", "证件号": "${PASSPORT}", "航班": "${flight}"}',
    "我是${PERSON}，常旅客卡绑定的邮箱${EMAIL}，里程一直没到账。",
    "送机预约：${date}${time}，上车地点${ADDR}，车牌${PLATE}，乘车人${PERSON}。",
    "您好，${PERSON}，您的${flight}航班登机口变更为C12。",
    "团队订票，领队${PERSON}，护照${PASSPORT}；团员${PERSON2}，护照${PASSPORT}。",
    # ---- bank ----
    "持卡人${PERSON}，卡号${CARD}，我要挂失。",
    "我的卡${CARD}被盗刷了${amount}元，我人在${city}，卡一直在身上。",
    "持卡人${PERSON}，身份证${ID}，预留手机${MOBILE}，账单地址改为${ADDR}。",
    "${FEMALE}女士您好，您申请的账单分期已办理，每期还款${amount}元。",
    "账单寄送地址是${ADDR}，电子账单邮箱${EMAIL}。",
    "转账给${PERSON}，卡号${CARD}，开户行${bank}${city}分行。",
    "您好，${PERSON}，为保障资金安全，请勿向任何人透露验证码。",
    "我是${PERSON}，公司座机${LANDLINE}，想问一下对公账户的年费。",
    "ETC绑定的车牌是${PLATE}，扣款卡是${CARD}。",
    "车贷还款，车牌号${PLATE}，借款人${PERSON}，身份证${ID}。",
    "信用卡${CARD}的还款日是几号？持卡人${PERSON}。",
    "经办人${PERSON}，身份证${ID}，来网点办理对公开户。",
    "我叫${PERSON}，信用卡${CARD}额度想临时调高一点。",
    '核身结果：{"持卡人": "${PERSON}", "卡号": "${CARD}", "预留手机": "${MOBILE}", "结果": "一致"}',
    "代扣协议：车牌${PLATE}，车主${PERSON}，联系电话${PHONE}。",
    "客户：我叫${PERSON}，卡被吞了。\n客服：${SAME}您好，请提供卡号。\n客户：${CARD}。",
    "尊敬的${PERSON}，您的${bank}借记卡${CARD}已完成激活。",
    "新卡请寄到${ADDR}，收件人${PERSON}，电话${LANDLINE}。",
    "停车缴费绑定车牌${PLATE}，扣款失败，绑定的卡是${CARD}。",
    "免贵姓${SURNAME}，我叫${PERSON}，身份证${ID}，想查一下名下的卡。",
    # ---- vehicles, misc service ----
    "网约车投诉：司机车牌${PLATE}，绕路多收了${amount}元，我的手机${MOBILE}。",
    "违章代缴：车牌${PLATE}，车主身份证${ID}。",
    "车险续保，车牌${PLATE}，被保险人${PERSON}，身份证${ID}。",
    "您好${PERSON}，您的车辆${PLATE}保养预约在${date}上午。",
    "洗车订单：${PLATE}，联系人${PERSON}，电话${MOBILE}。",
    "小区门禁登记车牌${PLATE}，业主${PERSON}，住址${ADDR}。",
    "充电桩订单，车牌${PLATE}，新能源车，请开电子发票到${EMAIL}。",
    "代驾师傅电话${MOBILE}，车牌${PLATE}，请在${time}前到达。",
    # ---- extra address / passport / id / e-mail forms ----
    "默认收货地址是${ADDR}，这次想寄到公司：${ADDR}。",
    "麻烦把账单地址从${ADDR}改成新家，新地址我稍后发邮件到${EMAIL}确认。",
    "外宾入住登记：${PERSON}，护照${PASSPORT}，房间${room}。",
    "出境游签证材料已收到，护照号码${PASSPORT}，寄回地址${ADDR}。",
    "您好，我要补开发票，身份证号${ID}，接收邮箱${EMAIL}。",
    "我的身份证是${ID}，为什么提示已被其他账号实名认证？",
]

EMPTY_TEMPLATES = [
    "您好，高档型房间今天还有吗？钟点房怎么收费？",
    "好的，谢谢，马上帮您查询，请稍等。",
    "请问${city}有你们的门店吗？周一到周五白天营业吗？",
    "您的订单号${order}已经退款，金额${amount}元，预计1-3个工作日到账。",
    "单笔转账超过5万元需要U盾验证，余额不足时会转账失败。",
    "黄金会员积分可以抵扣房费吗？",
    "实例${instance}位于${region}，安全组规则已放行443端口，请重试。",
    "请在北京时间${date}${time}之前完成备案资料上传，文件格式为PDF。",
    "客服热线${hotline}，工作时间早上9点到晚上9点。",
    "我常用的是高铁出行，这次改签方便吗？",
    "于是我又重新下了一单，订单号${order}，能合并发货吗？",
    "行李额是多少？经济舱托运20公斤，超重部分按每公斤${amount}元收费。",
    "发票已开具，金额合计${amount}元，可在订单详情页下载。",
    "${product}目前缺货，预计${date}补货，到货后短信通知您。",
    "版本${version}修复了控制台偶发白屏的问题，建议升级。",
    "${region}地域的带宽价格和其他地域一样吗？",
    "请问东方航空和南方航空的行李额一样吗？",
    "拨打${hotline}转人工，报一下订单号${order}即可。",
    "您好，请问有什么可以帮您？",
    "流量包${n}GB，月底自动失效，不能结转到下月。",
    "早餐时间6:30到10:00，在酒店二楼自助餐厅。",
    "大床房和双床房价格一样，含双早，${date}18:00前可免费取消。",
    "不好意思让您久等了，正在为您查询物流信息。",
    "您的退款申请已提交，审核通过后原路退回，请耐心等待。",
    "ECS实例${instance}已停止，停机不收费模式下系统盘仍然计费。",
    "实名认证需要上传证件正反面照片，文件大小不超过5MB。",
    "温馨提示：周一至周五9:00-18:00为人工服务时间，节假日顺延。",
    "包邮吗？满${amount}元包邮，偏远地区除外。",
    "这个套餐每月${amount}元，包含${n}GB国内流量和500分钟通话。",
    "航班${flight}今天准点，请提前40分钟到达登机口。",
    "白金会员可以免费升舱一次，黄金会员享受优先值机。",
    "您的信用卡账单已出，本期应还金额${amount}元，最后还款日${date}。",
    "申请分期的手续费率是多少？分12期每期多少钱？",
    "请问这张发票可以报销吗？单位要求有税号。",
    "如何修改安全组？控制台里找不到入口。",
    "快递单号${tracking}显示在${city}中转站滞留两天了。",
    "马上就到双十一了，付款后多久发货？",
    "${city}到${city}的高铁票还有吗？二等座就行。",
    "已为您申请补偿${amount}元优惠券，有效期7天。",
    "这个型号是${product}，保修期一年，人为损坏不在保修范围内。",
    "磁盘扩容后需要在系统内执行resize2fs，文件系统才会变大。",
    "CDN回源失败，错误码502，请检查源站配置。",
    "域名备案主体变更需要重新提交材料，大约需要20个工作日。",
    "钟点房最多4小时，超时按半天房费计算。",
    "您好，本次通话可能会被录音，以便提升服务质量。",
    "宽带升级到1000M后网速反而变慢了，路由器型号${router}。",
    "话费余额${amount}元，本月已用流量${n}GB。",
    "银行卡年费怎么收？首年免年费吗？",
    "请问${bank}的手机银行转账限额是多少？",
    "挂失后补卡需要工本费吗？大约几天能拿到新卡？",
    "改签手续费按票面价的10%收取，起飞前2小时以上免费。",
    "退房时间是中午12点，延迟退房到14点免费。",
    "您反映的问题已记录，工单号${ticket}，24小时内会有专员回复。",
    "RDS实例规格从2核4G升级到4核8G，升级过程中会有闪断。",
    "发货仓在${city}，一般两到三天送达。",
    "订单${order}中的商品已出库，物流更新可能有延迟。",
    "好的，那我先不退了，谢谢你们。",
    "这款吹风机有高、中、低三档风速，冷热风可切换。",
    "常见问题里说可以七天无理由退货，是真的吗？",
    "如果方便的话，麻烦截个图发过来，我们这边核实一下。",
    "任何情况下客服都不会向您索要验证码，请注意防范诈骗。",
    "夏季房价是不是会上调？",
    "锂电池必须随身携带，不能托运。",
    "对公转账请备注订单号${order}，到账后自动开通。",
    "云服务器ECS通用型g7，${n}核，按量付费每小时${amount}元。",
    "申请开具发票时，抬头和税号必须与营业执照一致。",
    "您好，欧式早餐和中式早餐可以二选一。",
    "周末的价格比平时高一些，因为是旺季。",
    "${product}一箱${amount}元，满两箱减5元。",
    "向您致歉，由于系统升级，部分订单状态显示异常。",
    "请问江浙沪包邮吗？新疆西藏需要补运费。",
    "ICP许可证过期了，需要重新申请吗？",
    "申请退款后，优惠券会退回吗？",
    "安全组入方向规则已添加，协议TCP，端口22。",
    "北京时间${time}系统维护，届时控制台暂停访问。",
    "您在${hotel}的订单已确认，${room}一间，含早餐。",
    "金额${amount}元已原路退回，请注意查收。",
    "高铁晚点导致误机，可以免费改签吗？",
    "文件已经上传了，审核大概要多久？",
    "${date}起，${region}的实例价格下调15%。",
    "订单${order}申请售后，商品是${product}。",
    "您好，您咨询的${flight}航班已起飞，预计${time}到达。",
    "王者荣耀点券充值没到账，订单号${order}。",
    "万一快递丢件怎么赔？保价了${amount}元。",
    "对不起，系统显示该房型已满房，可以为您推荐高档型双床房。",
    "这张发票的金额不对，少开了${amount}元。",
    "白天打不通客服电话，晚上几点之前有人工？",
    "信号不好，${city}这边经常只有一格。",
    "常旅客里程${n}000公里可以兑换一张单程机票。",
    "钟点房可以开发票吗？",
    "周一上午系统升级，${version}版本的客户端需要重新登录。",
    "收件人信息不完整，请补充后重新提交。",
    "持卡人本人到网点办理即可，需携带身份证原件。",
    "乘机人信息请与证件保持一致，否则无法值机。",
    "负载均衡实例的带宽上限是${n}Mbps。",
]


PLACEHOLDER = re.compile(r"\$\{(\w+)\}")
LABELS = {"PERSON": "PERSON", "PERSON2": "PERSON", "SAME": "PERSON", "MALE": "PERSON", "FEMALE": "PERSON",
          "SURNAME": "PERSON", "ADDR": "STREET_ADDRESS", "PLATE": "CN_LICENSE_PLATE", "ID": "CN_RESIDENT_ID",
          "PASSPORT": "PASSPORT_NUMBER", "PHONE": "PHONE_NUMBER", "MOBILE": "PHONE_NUMBER",
          "LANDLINE": "PHONE_NUMBER", "CARD": "CREDIT_CARD", "EMAIL": "EMAIL_ADDRESS"}


def render(template: str, filler: Filler, fillers: dict[str, Callable[[], str]]) -> dict:
    text: list[str] = []
    spans: list[dict] = []
    pos = 0
    last = 0
    person = pending = None
    for m in PLACEHOLDER.finditer(template):
        literal = template[last:m.start()]
        text.append(literal)
        pos += len(literal)
        key = m.group(1)
        if key in LABELS:
            if key == "SURNAME":
                pending = filler.person()
                value = pending[0]
            elif key == "PERSON":
                _, value = pending or filler.person()
                pending, person = None, value
            elif key == "PERSON2":
                value = person
                while value == person:
                    _, value = filler.person()
            elif key == "SAME":
                value = person
            elif key in ("MALE", "FEMALE"):
                _, value = filler.person(key.lower())
                person = value
            else:
                value = {"ADDR": filler.address, "PLATE": filler.plate, "ID": filler.resident_id,
                         "PASSPORT": filler.passport, "PHONE": filler.phone, "MOBILE": filler.mobile,
                         "LANDLINE": filler.landline, "CARD": filler.card, "EMAIL": filler.email}[key]()
            spans.append({"entity_type": LABELS[key], "entity_value": value,
                          "start_position": pos, "end_position": pos + len(value)})
        else:
            value = fillers[key]()
        text.append(value)
        pos += len(value)
        last = m.end()
    text.append(template[last:])
    return {"full_text": "".join(text), "spans": spans}


def build(seed: int = SEED) -> list[dict]:
    filler = Filler(seed)
    fillers = filler.fillers()
    jobs = [t for t in PII_TEMPLATES for _ in range(REPEAT_PII)]
    jobs += [t for t in EMPTY_TEMPLATES for _ in range(REPEAT_EMPTY if PLACEHOLDER.search(t) else 1)]
    filler.rng.shuffle(jobs)
    items, seen = [], set()
    for template in jobs:
        item = render(template, filler, fillers)
        if item["full_text"] not in seen:  # a repeated text would only weigh twice
            seen.add(item["full_text"])
            items.append(item)
    for item in items:  # self-check: the spans are what they say
        for s in item["spans"]:
            assert item["full_text"][s["start_position"]:s["end_position"]] == s["entity_value"], s
    return items


def dumps(items: list[dict]) -> str:
    return "[\n" + ",\n".join(json.dumps(item, ensure_ascii=False) for item in items) + "\n]\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"output path (default {OUT})")
    args = parser.parse_args(argv)
    args.out.write_text(dumps(build()), encoding="utf-8")


if __name__ == "__main__":
    main()
