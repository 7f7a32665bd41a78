"""A synthetic support-chat corpus with labelled canned lines (for ``canned_lines.py``).

Real chat logs that may be redistributed were not found (docs/canned-lines.md
says where we looked), so this builds chats the way real ones look: a shop's
agents paste macros (greetings with the shop's and the agent's name, holds,
"thanks for waiting", "anything else?", sign-offs with the shop's name and a
wish, rating requests, "you're welcome", transfer notices) with per-ticket
variation (customer names, emoji and stickers, punctuation, a macro sent as
its own message or glued before or after a real answer), and they also
repeat *informative* lines (policy statements, requests for an order number,
state updates), some without a single digit, which must survive.

Every agent message is built from labelled segments: ``canned`` (a macro,
procedural) or ``info`` (an answer); every customer message is ``info`` or
``filler`` ("ok thanks").  Two macro inventories exist: ``tune`` (what the
thresholds were chosen on) and ``heldout`` (other shops, other wordings of
the same kinds of macro, other policy lines), so the held-out figures are
measured on lines the pass was never looked at with.

    corpus("heldout", "zh", 400, seed=2)  ->  list of LabelledTicket
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

CANNED, INFO, FILLER = "canned", "info", "filler"


@dataclass
class LabelledMessage:
    role: str  # customer | agent
    segments: list[tuple[str, str]]  # (text, label: "canned/<kind>", "info" or "filler"), joined by ``glue``
    glue: list[str] = field(default_factory=list)  # len(segments) - 1 separators

    @property
    def text(self) -> str:
        out = self.segments[0][0]
        for sep, (text, _) in zip(self.glue, self.segments[1:]):
            out += sep + text
        return out


@dataclass
class LabelledTicket:
    ticket_id: str
    language: str
    messages: list[LabelledMessage]


# --- English ------------------------------------------------------------------

EN = {
    "tune": {
        "shops": ["Acme Outdoors", "BrightHome", "Nimbus Mobile", "Pinecone Books"],
        "agents": ["Alex", "Priya", "Tom", "Maria", "Kenji"],
        "greeting": ["Hi {name}, thanks for contacting {shop} Support! My name is {agent}.",
                     "Hello and welcome to {shop}! {agent} here, how can I help you today?",
                     "Hi there, this is {agent} with {shop}. What can I do for you?"],
        "hold": ["Please give me a moment while I look into this.", "Let me pull up your account, one moment please.",
                 "Thanks for your patience while I check."],
        "waited": ["Thanks for waiting.", "Thank you for holding.", "Thanks for your patience, {name}."],
        "anything": ["Is there anything else I can help you with today?", "Anything else I can do for you?"],
        "signoff": ["Thanks for choosing {shop}, have a wonderful day! {emoji}",
                    "Take care, {name}, and enjoy the rest of your week!"],
        "rating": ["You'll get a short survey after this chat, we'd love your feedback!",
                   "Please rate this conversation when the survey pops up."],
        "welcome": ["You're welcome!", "My pleasure, {name}!"],
        "transfer": ["I'm transferring you to our billing team now, please stay on the chat."],
        # informative lines the shop repeats, by topic (the index into EN_TOPICS); None: any topic
        "policy": [("You can track the parcel from the Orders page.", 0), ("Your order has been shipped.", 0),
                   ("Refunds go back to the original payment method.", 1),
                   ("Exchanges are only possible for unused items with the tags attached.", 2),
                   ("A return label has been emailed to you.", 2), ("I've issued a full refund for that order.", 4),
                   ("Could you please confirm the email address on the account?", 5),
                   ("Could you give me the order number?", None)],
    },
    "heldout": {
        "shops": ["Harbor Electronics", "Maple & Co", "Zephyr Travel", "Lumen Fitness"],
        "agents": ["Sam", "Leila", "Dmitri", "Grace", "Omar"],
        "greeting": ["Good morning {name}! You've reached the {shop} help desk.",
                     "Hey {name}, {agent} from {shop} here {emoji}",
                     "Thank you for reaching out to {shop} customer care, I'm {agent}."],
        "hold": ["Bear with me for a minute while I review your order.",
                 "I'm looking into this now, it should only take a minute.",
                 "Just a sec, checking our system for you."],
        "waited": ["Sorry for the wait!", "Appreciate your patience, {name}."],
        "anything": ["Can I help with anything else while I have you?",
                     "Is there something else you need from us today?"],
        "signoff": ["It was a pleasure helping you, {name}. Have a lovely evening!",
                    "Thanks again for being a {shop} customer. Stay safe! {emoji}"],
        "rating": ["If you have a moment, please rate my service today.",
                   "Your feedback helps us improve, please fill in the short survey."],
        "welcome": ["Anytime!", "Glad I could help, {name}!"],
        "transfer": ["Let me connect you with a specialist from our returns department."],
        "policy": [("The courier leaves a card if nobody is home.", 0), ("Store credit never expires.", 1),
                   ("Gift cards cannot be refunded or exchanged.", 1),
                   ("Please send us a photo of the damaged item.", 2),
                   ("The old address is removed from your account as well.", 3),
                   ("Price adjustments apply to items bought at full price.", 4), ("Your account is now unlocked.", 5),
                   ("May I have the order number, please?", None)],
    },
}
EN_NAMES = ["Sarah", "John", "Emily", "Michael", "Aisha", "Carlos", "Hannah", "Wei", "Olivia", "David", "Fatima",
            "Lucas", "Chloe", "Noah", "Ines", "Ravi"]
EN_EMOJI = ["😊", "🙂", "👋", ":)", "🌟", ""]
EN_ITEMS = ["tent", "lamp", "phone case", "novel", "kettle", "backpack", "charger", "yoga mat"]
EN_CARRIERS = ["UPS", "FedEx", "DHL", "USPS"]
EN_TOPICS = [
    (["Where is my order {order}? It was supposed to arrive on {date}.", "hi, my parcel {order} still hasn't come",
      "Tracking for {order} hasn't updated since {date}, is it lost?"],
     ["Your order {order} left our warehouse on {date} with {carrier}, tracking number {track}.",
      "It is at the {carrier} depot now and should be delivered by {date2}."]),
    (["I returned the {item} last week, when do I get my money back?", "Still waiting on my refund for the {item}",
      "you got my return on {date}, where is the refund"],
     ["The return reached us on {date} and the refund of ${amount} was issued today.",
      "It usually shows on your statement within 3 to 5 business days."]),
    (["The {item} arrived broken, the handle is cracked.", "my {item} came damaged, can I get a new one?",
      "Received order {order} today and the {item} is smashed"],
     ["I have arranged a replacement {item} for order {order}; it ships on {date2}.",
      "There is no need to send the broken one back."]),
    (["Can I change the delivery address for order {order}? I moved to {street}.",
      "Need to update my shipping address to {street}", "wrong address on {order}, it should be {street}"],
     ["I updated the address on order {order} to {street} before it was packed.",
      "The new address shows on the order page as well."]),
    (["I was charged twice, ${amount} each time, for order {order}.", "Why did my card get billed two times?",
      "There are two payments of ${amount} on my statement"],
     ["I see two charges of ${amount}; the second one is a pre-authorisation and drops off within 2 days.",
      "If it is still there on {date2}, reply here and we will refund it."]),
    (["I can't log in, it says my password is wrong.", "locked out of my account, password reset isn't working",
      "How do I reset my password? The login page keeps failing"],
     ["I sent a reset link to the address ending in {mail}; it is valid for 30 minutes.",
      "After the reset, sign in again on the app as well."]),
]
EN_CUSTOMER_FILLER = ["ok", "Thanks!", "ok thank you", "great, thanks", "That's all, thanks.", "No that's it, thanks!"]
EN_CUSTOMER_FOLLOW = ["Will I get an email when it ships?", "Do I need to print anything?",
                      "Can you send me the receipt for order {order}?", "Is the {item} still under warranty?"]
EN_FOLLOW_ANSWER = ["Yes, you will get an email with the tracking link as soon as it moves.",
                    "No printing needed, the driver brings the label.",
                    "I have sent the receipt for order {order} to your email.",
                    "Yes, the {item} has a 2 year warranty from the delivery date."]


# --- Chinese ------------------------------------------------------------------

ZH = {
    "tune": {
        "shops": ["优选家居旗舰店", "云途数码专营店", "小米粒母婴店", "青禾茶叶官方店"],
        "agents": ["小美", "小雅", "阿杰", "小七", "小鹿"],
        "greeting": ["亲，您好，欢迎光临{shop}，我是客服{agent}，很高兴为您服务~",
                     "{name}您好，这里是{shop}官方客服，请问有什么可以帮您？",
                     "在的亲，{agent}在线为您服务哦{sticker}"],
        "hold": ["亲，请稍等，这边帮您查询一下哦~", "好的，正在为您核实，请您耐心等待一下"],
        "waited": ["让您久等了", "感谢您的耐心等待"],
        "anything": ["请问还有其他可以帮您的吗？", "亲，还有别的问题需要咨询吗？"],
        "signoff": ["感谢您对{shop}的支持，祝您生活愉快~{sticker}", "好的亲，那就不打扰您了，祝您购物愉快，再见！"],
        "rating": ["麻烦亲对本次服务做出评价哦，您的满意是我们最大的动力",
                   "亲，稍后系统会邀请您评价，麻烦点个非常满意哦~"],
        "welcome": ["不客气的亲~", "不用客气，这是我们应该做的"],
        "transfer": ["正在为您转接售后专员，请稍候"],
        "policy": [("我们默认发中通快递，偏远地区除外", 0), ("您的订单已经发货了", 0), ("退款会原路退回到您的支付账户", 1),
                   ("亲，这款是支持全国联保的", 2), ("已经为您申请退款了，请留意退款进度", 4), ("发票会随货一起寄出", 5),
                   ("请您提供一下订单号哦", None)],
    },
    "heldout": {
        "shops": ["星河电器专卖店", "花间美妆旗舰店", "北纬户外用品店", "暖暖宠物生活馆"],
        "agents": ["小桃", "阿宁", "小橙", "小曼", "阿凯"],
        "greeting": ["{name}您好呀，{shop}{agent}向您问好🌸", "亲爱的顾客您好，{shop}售后{agent}为您服务",
                     "哈喽亲，欢迎来到{shop}，有问题随时问我哦"],
        "hold": ["收到，{agent}马上去仓库帮您问一下哈", "亲亲别着急，我这边核对下订单信息哦"],
        "waited": ["亲，久等啦", "抱歉回复慢了"],
        "anything": ["亲还有其他疑问吗~", "请问您还需要了解其他商品吗？"],
        "signoff": ["{shop}全体客服祝您工作顺利，万事如意！", "有问题随时来找{agent}哦，拜拜~💕"],
        "rating": ["如果{agent}的服务让您满意，请给个五星好评哈", "您的评价对我们很重要，记得给个好评哦亲"],
        "welcome": ["亲太客气啦", "能帮到您是我的荣幸"],
        "transfer": ["这个问题需要售后同事处理，已经帮您转过去了哦"],
        "policy": [("签收时请先验货再签字", 0), ("这边已经帮您备注了尽快发货", 0), ("会员积分可以抵扣部分货款", 1),
                   ("定制商品不支持退换货", 2), ("麻烦您拍一下商品的照片发过来", 2), ("修改地址需要在发货前联系客服", 3),
                   ("活动价格以下单时页面显示为准", 4), ("电子发票和纸质发票具有同等效力", 5)],
    },
}
ZH_SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗"
ZH_GIVEN = ["伟", "芳", "娜", "敏", "静", "磊", "洋", "艳", "勇", "军", "杰", "娟", "涛", "明", "超", "秀英", "桂兰", "建华"]
ZH_STICKERS = ["[玫瑰]", "[微笑]", "[爱心]", "🌹", "😊", "(^_^)", ""]
ZH_ITEMS = ["电饭煲", "保温杯", "蓝牙耳机", "婴儿推车", "茶具套装", "床垫", "吹风机", "空气炸锅"]
ZH_CARRIERS = ["中通", "顺丰", "圆通", "韵达"]
ZH_TOPICS = [
    (["我的订单{order}怎么还没到？说好{date}送到的", "快递到哪了，物流一直没更新", "订单{order}的快递是不是丢了"],
     ["您的订单{order}已于{date}由{carrier}发出，运单号{track}", "目前在{city}转运中心，预计{date2}前送达"]),
    (["上周退回去的{item}什么时候退款啊", "退货你们都签收了，钱怎么还没退", "{item}退款进度怎么查"],
     ["仓库{date}已经签收了退货，{amount}元的退款今天已经原路退回", "一般1到3个工作日到账"]),
    (["收到的{item}是坏的，外壳裂了", "{item}用了一天就坏了，能换吗", "订单{order}的{item}包装破了，东西也摔坏了"],
     ["这边给您补发一个新的{item}，订单{order}会在{date2}发出", "坏的那个不用寄回来了"]),
    (["订单{order}能改一下收货地址吗？改成{street}", "地址填错了，麻烦改成{street}", "收货地址能修改吗"],
     ["订单{order}还没打包，地址已经改成{street}了", "您在订单详情页也能看到新地址"]),
    (["为什么扣了我两次钱，每次{amount}元", "付款扣了两笔是怎么回事", "银行卡被重复扣款了，{amount}元"],
     ["看到两笔{amount}元的扣款，其中一笔是预授权，2天内会自动退回", "如果{date2}还没退回，您再联系我们处理"]),
    (["{item}有发票吗？公司要报销", "能开增值税发票吗", "订单{order}的发票怎么开"],
     ["可以开电子发票，开好后会发到您预留的邮箱{mail}", "抬头和税号在订单备注里填写就可以"]),
]
ZH_CUSTOMER_FILLER = ["好的", "好的谢谢", "嗯嗯", "没有了，谢谢", "没有了", "好的，辛苦了", "收到"]
ZH_CUSTOMER_FOLLOW = ["那发货了会有短信通知吗", "需要我这边打印什么吗", "订单{order}的发票能一起开吗", "{item}保修多久啊"]
ZH_FOLLOW_ANSWER = ["发货后会有短信提醒，里面有物流链接", "不需要打印，快递员上门会带面单",
                    "订单{order}的发票已经开好发到您邮箱了", "{item}保修期是收货后2年"]


def _values(rng: random.Random, language: str) -> dict[str, str]:
    order = f"{rng.randint(10**9, 10**10 - 1)}"
    common = {"order": order, "amount": f"{rng.randint(19, 899)}", "track": f"{rng.randint(10**11, 10**12 - 1)}",
              "date": f"{rng.randint(1, 12)}月{rng.randint(1, 28)}日" if language == "zh" else
              f"March {rng.randint(1, 28)}", "date2": f"{rng.randint(1, 12)}月{rng.randint(1, 28)}日"
              if language == "zh" else f"April {rng.randint(1, 28)}",
              "mail": f"{rng.choice('abcdefgh')}{rng.randint(10, 99)}@example.com"}
    if language == "zh":
        return {**common, "item": rng.choice(ZH_ITEMS), "carrier": rng.choice(ZH_CARRIERS),
                "city": rng.choice(["杭州", "广州", "成都", "武汉"]),
                "street": f"{rng.choice(['杭州市西湖区文三路', '南京市鼓楼区中山路', '成都市武侯区人民南路'])}{rng.randint(1, 300)}号"}
    return {**common, "item": rng.choice(EN_ITEMS), "carrier": rng.choice(EN_CARRIERS),
            "city": rng.choice(["Denver", "Leeds", "Austin", "Lyon"]),
            "street": f"{rng.randint(1, 999)} {rng.choice(['Oak Street', 'Mill Lane', 'Harbor Road'])}"}


def _name(rng: random.Random, language: str) -> str:
    if language == "en":
        return rng.choice(EN_NAMES)
    surname = rng.choice(ZH_SURNAMES)
    return rng.choice([surname + rng.choice(["先生", "女士"]), surname + rng.choice(ZH_GIVEN)])


def _ticket(rng: random.Random, split: str, language: str, index: int) -> LabelledTicket:
    macros = (EN if language == "en" else ZH)[split]
    zh = language == "zh"
    shop, agent, name = rng.choice(macros["shops"]), rng.choice(macros["agents"]), _name(rng, language)
    values = {**_values(rng, language), "shop": shop, "agent": agent, "name": name,
              "emoji": rng.choice(EN_EMOJI), "sticker": rng.choice(ZH_STICKERS)}

    def fill(text: str) -> str:
        return text.format(**values).strip()

    def macro(kind: str) -> tuple[str, str]:
        return fill(rng.choice(macros[kind])), f"{CANNED}/{kind}"

    def sentence_glue() -> str:
        return rng.choice(["。", "！", "~", "\n", "，"]) if zh else " "

    def joined(segments: list[tuple[str, str]]) -> LabelledMessage:
        message = LabelledMessage("agent", segments)
        for previous, _ in segments[:-1]:
            ends = previous.endswith(("。", "！", "？", "~", "!", "?", ".", "😊", "]", ")", "🌸", "💕"))
            message.glue.append(("" if ends else sentence_glue()) if zh else " ")
        return message

    topics = ZH_TOPICS if zh else EN_TOPICS
    topic_index = rng.randrange(len(topics))
    questions, topic_answers = topics[topic_index]
    messages: list[LabelledMessage] = []
    opening = rng.random()
    if opening < 0.3:
        messages.append(LabelledMessage("customer", [(rng.choice(["在吗", "你好"] if zh else ["hi", "Hello"]), FILLER)]))
    messages.append(LabelledMessage("customer", [(fill(rng.choice(questions)), INFO)]))
    answers = [(fill(text), INFO) for text in topic_answers]
    policy = [text for text, on in macros["policy"] if on in (topic_index, None)]
    if policy and rng.random() < 0.6:  # an informative line the shop repeats on this topic
        answers.insert(rng.randint(0, len(answers)), (fill(rng.choice(policy)), INFO))
    greeting = macro("greeting")
    if rng.random() < 0.7:
        messages.append(joined([greeting]))
        greeting_glued = False
    else:
        greeting_glued = True
    hold = rng.random()
    if hold < 0.45 and not greeting_glued:
        messages.append(joined([macro("hold")]))
        first = [macro("waited")] if rng.random() < 0.5 else []
    elif hold < 0.75:
        first = [macro("waited")]
    else:
        first = []
    head = [greeting] if greeting_glued else []
    messages.append(joined(head + first + answers[:1]))
    if rng.random() < 0.1:
        messages.append(joined([macro("transfer")]))
    for answer in answers[1:]:
        messages.append(joined([answer]))
    if rng.random() < 0.5:
        which = rng.randrange(len(EN_CUSTOMER_FOLLOW))
        messages.append(LabelledMessage("customer", [(fill((ZH_CUSTOMER_FOLLOW if zh else EN_CUSTOMER_FOLLOW)[which]),
                                                      INFO)]))
        messages.append(joined([(fill((ZH_FOLLOW_ANSWER if zh else EN_FOLLOW_ANSWER)[which]), INFO)]))
    closing = rng.random()
    if closing < 0.4:
        messages.append(joined([macro("anything")]))
    elif closing < 0.8:
        messages[-1].segments.append(macro("anything"))
        messages[-1] = joined(messages[-1].segments)
    messages.append(LabelledMessage("customer", [(rng.choice(ZH_CUSTOMER_FILLER if zh else EN_CUSTOMER_FILLER),
                                                  FILLER)]))
    tail = []
    if rng.random() < 0.5:
        tail.append(macro("welcome"))
    tail.append(macro("signoff"))
    if rng.random() < 0.5:
        tail.append(macro("rating"))
    if rng.random() < 0.5:
        for segment in tail:
            messages.append(joined([segment]))
    else:
        messages.append(joined(tail))
    return LabelledTicket(f"{split}-{language}-{index:04d}", language, messages)


def corpus(split: str, language: str, tickets: int, seed: int) -> list[LabelledTicket]:
    """``tickets`` labelled chats of ``language`` from the ``split`` inventory."""
    rng = random.Random(f"{split}-{language}-{seed}")
    return [_ticket(rng, split, language, i) for i in range(tickets)]
