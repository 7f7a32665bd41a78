"""Chinese de-identification: Presidio recognizers for tickets written in Chinese.

``chinese_recognizers(language)`` returns one recognizer per entity:

* ``PERSON``: names of a gazetteer surname (single or compound) and one or
  two given-name characters, found after a cue (我叫, 收件人是, 联系人：,
  免贵姓张，...), in greetings and forms of address (姚雨您好, 尊敬的李明,
  您好，陈静, 张伟先生) or, without a cue, where jieba's part-of-speech
  tagger says ``nr`` for a word it does not know as an ordinary word.
  A bare surname is tagged only where the text discloses it (免贵姓张, 我姓王);
  ``张先生`` / ``王女士`` alone are left as they are: a surname and a title
  identify nobody.
* ``STREET_ADDRESS``: province / city / district / town, then a road and a
  house number (optionally building, unit, floor, room), or an estate with a
  building or unit number (幸福小区3栋2单元501), or a district and a road.
  A city or a cloud region alone is not an address.
* ``CN_LICENSE_PLATE``, ``CN_RESIDENT_ID`` (ISO 7064 MOD 11-2 check
  character), ``PASSPORT_NUMBER``, ``PHONE_NUMBER`` (landlines with an area
  code; mobiles with full-width digits or a +86 prefix), ``CREDIT_CARD``
  (UnionPay and debit cards, Luhn), ``EMAIL_ADDRESS`` (ASCII addresses written
  against Chinese text, without the characters around them).

Chinese has no spaces and Python's ``\\b`` treats a Chinese character as a
word character, so every lookaround here uses ASCII classes.  Every pattern
is linear (bounded quantifiers, no nested repetition), and jieba segments a
text once however many recognizers look at it.  jieba is loaded lazily, once
per process, from the dictionary it ships with; nothing is downloaded.
"""

from __future__ import annotations

import bisect
import calendar
import functools
import logging
import re
import threading
import warnings
from collections.abc import Iterable
from typing import NamedTuple

from presidio_analyzer import AnalysisExplanation, EntityRecognizer, LocalRecognizer, RecognizerResult

from cirrus.checksums import luhn
from cirrus.cjk import HAN, HAN_RANGES

__all__ = ["chinese_recognizers"]

_H = HAN_RANGES  # Han characters (cirrus.cjk)
_DG = "0-9\uff10-\uff19"  # ASCII and full-width digits
_FULLWIDTH = str.maketrans("０１２３４５６７８９ＸｘＡＢＣＤＥＦＧＨＩＪＫＬＭＮＯＰＱＲＳＴＵＶＷＹＺ",
                           "0123456789XxABCDEFGHIJKLMNOPQRSTUVWYZ")


def _is_han(ch: str) -> bool:
    return HAN.fullmatch(ch) is not None


def _ascii(text: str) -> str:
    return text.translate(_FULLWIDTH)


def _cue_before(text: str, start: int, cue: re.Pattern[str], window: int = 16) -> bool:
    return cue.search(text, max(0, start - window), start) is not None


# ---------------------------------------------------------------------------
# jieba, loaded once per process
# ---------------------------------------------------------------------------
_JIEBA_LOCK = threading.Lock()
_JIEBA: tuple | None = None  # (posseg tokenizer, FREQ, word_tag_tab, plain tokenizer)


def _jieba() -> tuple:
    global _JIEBA
    if _JIEBA is None:
        with _JIEBA_LOCK:
            if _JIEBA is None:
                with warnings.catch_warnings():  # jieba 0.42's regexes have invalid escapes
                    warnings.simplefilter("ignore", DeprecationWarning)
                    warnings.simplefilter("ignore", SyntaxWarning)
                    import jieba
                    import jieba.posseg

                jieba.setLogLevel(logging.WARNING)  # "Building prefix dict ..." goes to the logger
                jieba.initialize()  # the bundled dictionary (and a cache in the temp dir); no network
                _JIEBA = (jieba.posseg.dt, jieba.dt.FREQ, jieba.posseg.dt.word_tag_tab, jieba.dt)
    return _JIEBA


class _Token(NamedTuple):
    word: str
    flag: str
    start: int
    end: int


# jieba's part-of-speech HMM costs about a millisecond a character on a long
# run that its dictionary cannot split (a character repeated, a pasted blob);
# runs this long are cut with the dictionary alone, tagged from it
_LONG_RUN = re.compile(r"[\u4e00-\u9fd5a-zA-Z0-9+#&._]{200,}")


@functools.lru_cache(maxsize=32)
def _segment(text: str) -> tuple[_Token, ...]:
    """jieba's words with part-of-speech flags and character offsets."""
    posseg, _, tags, plain = _jieba()
    tokens: list[_Token] = []

    def place(words: Iterable[tuple[str, str]], offset: int, piece: str) -> None:
        pos = 0
        for word, flag in words:
            start = pos if piece.startswith(word, pos) else piece.find(word, pos)
            if start < 0:  # jieba does not rewrite text; be safe all the same
                continue
            tokens.append(_Token(word, flag, offset + start, offset + start + len(word)))
            pos = start + len(word)

    done = 0
    for long_run in _LONG_RUN.finditer(text):
        piece = text[done:long_run.start()]
        place(((p.word, p.flag) for p in posseg.cut(piece)), done, piece)
        place(((w, tags.get(w, "x")) for w in plain.cut(long_run.group(), HMM=False)), long_run.start(),
              long_run.group())
        done = long_run.end()
    piece = text[done:]
    place(((p.word, p.flag) for p in posseg.cut(piece)), done, piece)
    return tuple(tokens)


def _word_freq(word: str) -> tuple[int, str]:
    """(frequency, tag) of a word in jieba's dictionary: (0, "") when absent."""
    _, freq, tags, _ = _jieba()
    return freq.get(word) or 0, tags.get(word, "")


# ---------------------------------------------------------------------------
# shared result helpers
# ---------------------------------------------------------------------------
class _ZhRecognizer(LocalRecognizer):
    """A recognizer whose spans come from :meth:`spans`; Presidio's lemma
    context enhancer is told to leave the scores alone (it looks for English
    lemmas; the cues here are Chinese and already counted)."""

    ENTITY = ""
    NAME = ""

    def __init__(self, supported_language: str = "zh") -> None:
        super().__init__(supported_entities=[self.ENTITY], name=self.NAME, supported_language=supported_language)

    def load(self) -> None:
        pass

    def spans(self, text: str) -> Iterable[tuple[int, int, float, str]]:
        raise NotImplementedError

    def analyze(self, text: str, entities: list[str], nlp_artifacts: object = None) -> list[RecognizerResult]:
        if entities and self.ENTITY not in entities:
            return []
        results = []
        for start, end, score, why in _no_overlaps(self.spans(text)):
            results.append(RecognizerResult(
                self.ENTITY, start, end, score,
                AnalysisExplanation(recognizer=self.name, original_score=score, pattern_name=why,
                                    textual_explanation=why),
                recognition_metadata={RecognizerResult.RECOGNIZER_NAME_KEY: self.name,
                                      RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id,
                                      RecognizerResult.IS_SCORE_ENHANCED_BY_CONTEXT_KEY: True}))
        return results


def _no_overlaps(spans: Iterable[tuple[int, int, float, str]]) -> list[tuple[int, int, float, str]]:
    """Keep the best of overlapping spans: higher score, then longer (one
    cluster of overlapping spans at a time, so a long text stays linear)."""
    kept: list[tuple[int, int, float, str]] = []
    cluster: list[tuple[int, int, float, str]] = []
    cluster_end = -1

    def settle() -> None:
        chosen: list[tuple[int, int, float, str]] = []
        for span in sorted(cluster, key=lambda s: (-s[2], -(s[1] - s[0]), s[0])):
            if all(span[1] <= k[0] or span[0] >= k[1] for k in chosen):
                chosen.append(span)
        kept.extend(sorted(set(chosen)))

    for span in sorted(spans):
        if cluster and span[0] >= cluster_end:
            settle()
            cluster = []
        cluster.append(span)
        cluster_end = max(cluster_end, span[1]) if len(cluster) > 1 else span[1]
    if cluster:
        settle()
    return kept


# ---------------------------------------------------------------------------
# STREET_ADDRESS
# ---------------------------------------------------------------------------
_PROVINCE = ("(?:(?:北京|天津|上海|重庆)市?|(?:河北|山西|辽宁|吉林|黑龙江|江苏|浙江|安徽|福建|江西|山东|河南|湖北|湖南|"
             "广东|海南|四川|贵州|云南|陕西|甘肃|青海|台湾)省?|内蒙古(?:自治区)?|广西(?:壮族自治区)?|西藏(?:自治区)?|"
             "宁夏(?:回族自治区)?|新疆(?:维吾尔自治区)?|香港(?:特别行政区)?|澳门(?:特别行政区)?)")
_CITY = rf"(?:[{_H}]{{1,6}}?(?:自治州|地区|市|州|盟))"
_DISTRICT = rf"(?:[{_H}]{{1,5}}?(?:新区|区|县|市|旗))"
_TOWN = rf"(?:[{_H}]{{1,5}}?(?:街道|镇|乡))"
_ROAD = rf"(?:[{_H}]{{1,8}}?(?:大街|大道|胡同|路|街|巷|道))"
_HOUSE = (rf"(?:[甲乙丙丁]?[{_DG}]{{1,5}}(?:[-－之][{_DG}]{{1,4}})?(?:号院|号楼|号|弄(?:[{_DG}]{{1,4}}号)?))")
_UNIT = (rf"(?:(?:[A-Za-z{_DG}]{{1,4}}|[一二三四五六七八九十]{{1,3}})(?:号楼|号院|栋|幢|座|单元|楼|层|室|房间|房|号|区|期|[Ff](?![A-Za-z]))"
         rf"|(?:地下|负)[{_DG}一二三]层)")
_UNITS = (rf"(?:[{_DG}]{{1,3}}[-－][{_DG}]{{1,3}}[-－][{_DG}]{{2,5}}(?![{_DG}A-Za-z])"
          rf"|(?:{_UNIT}){{1,5}}(?:[-－]?[{_DG}]{{2,5}}(?![{_DG}A-Za-z]))?)")
_POI = rf"(?:[{_H}A-Za-z]{{2,12}}?)"  # a building's name, when a floor or unit follows
_ESTATE = (rf"(?:[{_H}A-Za-z]{{1,10}}?(?:小区|花园|家园|花苑|苑|新村|公寓|名邸|山庄|公馆|华府|社区|大厦|广场|"
           rf"大楼|中心|国际|科技园|产业园|工业园|园区|商务楼|写字楼|宿舍|新城|村))")
_ADDRESS = re.compile(
    rf"(?P<prov>{_PROVINCE})?(?P<city>{_CITY})?(?P<dist>{_DISTRICT})?(?P<town>{_TOWN})?"
    rf"(?:(?P<road>{_ROAD})(?P<num>{_HOUSE})(?:(?P<poi>{_POI})(?={_UNIT}))?(?P<detail>{_UNITS})?"
    rf"|(?P<estate>{_ESTATE})(?P<edetail>{_UNITS})"
    rf"|(?P<bare>{_ROAD}))"
)
_ADDRESS_GROUPS = ("prov", "city", "dist", "town", "road", "poi", "estate", "bare")
_ADDRESS_HINT = re.compile(r"[路街道巷胡同弄区县镇乡苑园厦场寓村府邸庄宿城心际楼]")
# where an address component cannot start: everything up to the last of these
# in the first component is cut off ("我住在朝阳区..." -> "朝阳区...")
_ADDRESS_STOP = re.compile(r"改成|改为|换成|换到|写成|填成|地址|住址|地点|收货|收件|位于|[写填是在到的于至往我您你他她们说把被给让请从这那了过着吗呢吧啊就也还要想能址为寄送住]")
_ADDRESS_CUE = re.compile(r"地址|住址|住在|家住|寄到|送到|发到|寄往|送至|寄至|收货|派送|门牌|位于|搬到")
# roads that are ordinary words: "线路3号", "频道5号" (a road ending so is
# not one), "马路", "大道" (a road that is only this word is not one; 中山一路
# and 世纪大道 are)
_NOT_ROAD_ENDINGS = ("线路", "链路", "电路", "网路", "思路", "出路", "套路", "回路", "通路", "走路", "迷路", "让路",
                     "带路", "半路", "去路", "后路", "退路", "弯路", "原路", "路路", "通道", "频道", "知道", "渠道",
                     "车道", "跑道", "赛道", "管道", "隧道", "轨道", "味道", "难道", "走道", "过道", "坡道", "匝道",
                     "弯道", "报道", "霸道", "说道", "称道", "顺道", "逛街", "上街", "临街", "当街", "沿街", "满街")
_NOT_ROADS = frozenset(("一路", "上路", "门路", "陆路", "水路", "航路", "来路", "铁路", "道路", "马路", "公路", "支路",
                        "专路", "分路", "多路", "双路", "单路", "主路", "旁路", "人道", "公道", "地道", "一道", "街道",
                        "大街", "大道", "小巷", "小道", "要道", "胡同"))


def _not_a_road(road: str) -> bool:
    return road in _NOT_ROADS or road.endswith(_NOT_ROAD_ENDINGS)
_ADMIN_SUFFIX = frozenset("省市区县镇乡街道路巷弄旗州")
_STRONG_UNIT = re.compile(r"栋|幢|座|单元|号楼|号院|室|[0-9０-９][-－][0-9０-９]{1,3}[-－]")


def _stop_free(text: str) -> bool:
    return _ADDRESS_STOP.search(text) is None


@functools.lru_cache(maxsize=32)
def _address_spans(text: str) -> tuple[tuple[int, int, float, str], ...]:
    if not _ADDRESS_HINT.search(text):
        return ()
    spans = []
    pos = 0
    while pos < len(text):
        m = _ADDRESS.search(text, pos)
        if m is None:
            break
        found = _read_address(text, m)
        if found is None:
            pos = m.start() + 1
            continue
        spans.append(found)
        pos = found[1]
    return tuple(spans)


def _read_address(text: str, m: re.Match[str]) -> tuple[int, int, float, str] | None:
    groups = {g: (m.start(g), m.end(g)) for g in _ADDRESS_GROUPS if m.group(g)}
    first = min(groups, key=lambda g: groups[g][0])
    first_start, first_end = groups[first]
    start = first_start
    stop = None
    for stop in _ADDRESS_STOP.finditer(text, max(0, first_start - 1), first_end):
        pass
    if stop is not None and stop.end() > first_start:
        start = stop.end()
        if first in ("road", "estate", "bare"):
            core_name = text[start:first_end]
            if len(core_name) < 3:  # "路88号" left: no name
                return None
        elif first_end - start < 2:  # "在区": nothing of the district left
            del groups[first]
            if not groups:
                return None
            start = min(s for s, _ in groups.values())
        if first in groups:
            groups[first] = (start, first_end)
    # later components are names of their own: no stop word inside
    for g, (s, e) in groups.items():
        if g != first and not _stop_free(text[s:e]):
            return None
    admin = any(g in groups for g in ("prov", "city", "dist", "town"))
    local = any(g in groups for g in ("dist", "town"))
    cue = _cue_before(text, start, _ADDRESS_CUE, 12)
    end = m.end()
    if (text[start] in _ADMIN_SUFFIX and start > 0 and _is_han(text[start - 1])
            and not _ADDRESS_STOP.match(text, start - 1) and not m.group("prov")):
        return None  # "(平山)区彭路357号": the tail of a district, not a name
    if "road" in groups:
        road = text[slice(*groups["road"])]
        if _not_a_road(road) and not admin:
            return None
        if len(road) < (2 if admin else 3):
            return None
        if admin or m.group("detail") or cue:
            score, why = 0.85, "road and house number with district or unit"
        elif road.endswith(("路", "大街", "大道", "胡同", "巷")):
            score, why = 0.7, "road and house number"
        else:
            return None
    elif "estate" in groups:
        detail = m.group("edetail")
        if not (admin or cue or _STRONG_UNIT.search(detail) or len(re.findall(_UNIT, detail)) >= 2):
            return None
        score, why = (0.85 if admin else 0.8), "estate with building or unit"
    else:
        road = text[slice(*groups["bare"])]
        if not local or _not_a_road(road) or len(road) < 3:
            return None
        score, why = 0.65, "district and road"
    if cue:
        score = min(0.95, score + 0.05)
    return start, end, score, why


class ChineseAddressRecognizer(_ZhRecognizer):
    ENTITY = "STREET_ADDRESS"
    NAME = "zh_address"

    def spans(self, text: str) -> Iterable[tuple[int, int, float, str]]:
        return _address_spans(text)


# ---------------------------------------------------------------------------
# PERSON
# ---------------------------------------------------------------------------
# about 330 of the most common single surnames; characters that are mostly
# function words (和 时 都 来 那 但 由 ...) are left out even where they are
# also surnames
SINGLE_SURNAMES = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何林高罗郑梁谢宋唐许邓韩冯曹彭曾肖田董潘袁蔡蒋余于杜叶程魏苏吕丁任卢姚沈钟"
    "姜崔谭陆范汪廖石金韦贾夏付傅方邹熊白孟秦邱侯江尹薛闫阎段雷龙黎史陶贺毛郝顾龚邵万覃武钱戴严莫孔向常汤康易"
    "乔赖文施洪辛柳樊殷牛葛庞章鲁齐安聂倪颜邢温欧詹尚耿关兰焦俞左甘祝包宁符舒阮柯纪梅童凌毕单季裴霍涂成苗谷"
    "盛曲翁冉骆蓝路游靳管柴蒙鲍华喻祁蒲房滕屈饶解牟艾尤阳穆农司卓古吉缪简车项连芦麦褚娄窦戚岑景费卜晏席卫"
    "柏宗瞿桂佟臧闵苟邬边卞姬师仇栾隋商刁沙荣巫寇桑郎甄丛仲虞敖巩明佘池查麻苑迟邝封谈匡鞠惠荆乐冀郁胥南"
    "班储栗燕楚鄢劳谌奚皮粟冼蔺楼闻厉伊仝郜阚帅屠朴廉禹祖漆卿狄宣晁芮阙浦戈伏鹿薄邸雍辜羊裘亓邰赫杭逯隆茹"
    "诸慕嵇湛宾戎勾茅束檀昝奉尧萧钮龏晋饶汝"
)
COMPOUND_SURNAMES = frozenset((
    "欧阳", "司马", "上官", "诸葛", "东方", "皇甫", "尉迟", "公孙", "慕容", "长孙", "宇文", "司徒", "夏侯", "令狐",
    "端木", "轩辕", "独孤", "南宫", "万俟", "闻人", "赫连", "澹台", "公冶", "宗政", "濮阳", "淳于", "单于", "太叔",
    "申屠", "钟离", "呼延", "拓跋", "司空", "鲜于", "闾丘", "公羊", "梁丘", "段干", "东门", "巫马", "南门",
))
_COMPOUND_FIRST = frozenset(name[0] for name in COMPOUND_SURNAMES)
# characters that are (almost) never part of a given name: particles,
# pronouns, common verbs, units, and the words of an address or an order
_NON_NAME = frozenset(
    "的了是在有不这那个们您你我他她它吗呢吧啊哦嗯呀哈么什怎谁哪就都也还又再才只很太最更已被把让给对从向往到于"
    "与和及或但而如果因所以可能会要想去来说看做用过着没别请问谢号块钱点分秒年周时期间房店费价量次件台部套区市"
    "省县镇路街道巷楼层室栋单户址码机卡票证先女士姐生名字姓叫吗啦嘛哟喂呗咯该将并且即便让使被比等屏器品型网线盘"
    "板键鼠"
)
_TITLES = ("先生", "女士", "小姐", "老师", "同学", "经理", "师傅", "阿姨", "总", "律师", "医生", "大夫")
_TITLE_CUES = ("先生", "女士", "小姐", "老师", "同学", "总经理", "经理")
# a name right before one of these is a place or an organisation (张江镇, 王府井大街)
_PLACE_AFTER = re.compile(r"[路街道巷弄镇村区县市省州店馆院厦园场站港湾桥寺庙庄屯堡坊洲岛]|大学|学院|医院|公司|集团|银行|酒店|宾馆|中心|广场|号")
# part-of-speech flags of words that do not continue a name (张伟/想/问); the
# one-character morphemes (g, vg, ng, ...) are often given-name characters
_FUNCTION_FLAGS = ("v", "p", "c", "u", "d", "r", "y", "e", "o", "m", "q", "f", "t", "x", "z", "k", "l")
# a character before a two-character name that is a surname but more often a word (于/向/和 ...)
_AMBIGUOUS_FIRST = frozenset("于向和时由将与给为从跟对把被让叫请替帮是在同及连")
# words that look like a surname and a given name but are not people
_NOT_NAMES = frozenset((
    "高档型", "谢谢", "谢谢您", "您好", "好的", "王府井", "高铁", "金额", "文件", "方便", "白天", "常用", "江苏",
    "黄金", "明天", "马上", "安全", "万元", "周一", "周二", "周三", "周四", "周五", "周六", "周日", "周末", "石家庄",
    "钟点房", "余额", "于是", "林地", "张家口", "张家界", "张家港", "周庄", "金山", "叶子", "华为", "明星", "高达",
    "方正", "白云", "林立", "东方航空", "东方明珠", "南方航空", "海南航空", "黎明", "高峰期", "江浙沪", "石头",
    "金融", "金卡", "白金", "钱包", "高速", "包邮", "孙子", "宋体", "曹操", "常州", "沈阳", "江西", "苏州", "杭州",
    "温州", "宁波", "金华", "华东", "华北", "华南", "华中", "西南", "东北", "西北", "高新区", "余杭", "萧山", "黄山",
    "钟表", "高级", "高清", "高频", "欧阳", "司马", "上官", "诸葛", "东方", "车主", "车牌",
    "安装", "安心", "时间", "张江", "于此", "万达", "苏宁", "京东", "向日葵", "常旅客", "管家", "连锁", "包裹", "包装",
))
_COMMON_FREQ = 5  # a word jieba knows more often than this is an ordinary word
_NAME_FREQ = 100  # ... unless it is tagged as a name and no more frequent than this
_STRONG_NAME_FREQ = 500  # (after a strong cue: 收件人李娜)


def _function_word(flag: str) -> bool:
    return flag.startswith(_FUNCTION_FLAGS) and not flag.endswith("g")


class _Names:
    """Per-text state for the name search: the text, jieba's tokens and the
    address spans, which names never overlap."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _segment(text)
        self.bounds = {t.start for t in self.tokens} | {t.end for t in self.tokens}
        self.by_start = {t.start: t for t in self.tokens}
        self.addresses = _address_spans(text)  # sorted, not overlapping
        self.address_starts = [a[0] for a in self.addresses]

    # -- pieces ------------------------------------------------------------
    def surname_len(self, pos: int) -> int:
        if self.text[pos:pos + 2] in COMPOUND_SURNAMES:
            return 2
        return 1 if pos < len(self.text) and self.text[pos] in SINGLE_SURNAMES else 0

    def title_at(self, pos: int) -> bool:
        return self.text.startswith(_TITLES, pos)

    def nr_token(self, start: int, end: int) -> bool:
        token = self.by_start.get(start)
        return token is not None and token.end == end and token.flag.startswith("nr")

    def given_ok(self, start: int, end: int) -> bool:
        return all(_is_han(ch) and ch not in _NON_NAME for ch in self.text[start:end])

    def end_ok(self, end: int) -> bool:
        """What may follow a name in a greeting: nothing, punctuation, a title, 您."""
        text = self.text
        return (end >= len(text) or not _is_han(text[end]) or self.title_at(end)
                or text.startswith(("您", "你", "会员", "用户", "客户", "旅客", "乘客", "贵宾"), end))

    def left_ok(self, start: int) -> bool:
        text = self.text
        return (start == 0 or not _is_han(text[start - 1])
                or text.endswith(("尊敬的", "亲爱的", "致", "您好", "你好"), 0, start))

    # -- a name that starts or ends at a position ---------------------------
    def forward(self, p: int) -> tuple[int, int] | None:
        """The name that starts at ``p``: a surname and one or two characters,
        as long as jieba's word boundaries say."""
        s = self.surname_len(p)
        if not s or self.title_at(p + s):
            return None
        ends = []
        for g in (1, 2):
            e = p + s + g
            if e > len(self.text) or not self.given_ok(e - 1, e) or self.title_at(e - 1):
                break
            ends.append(e)
        if not ends:
            return None
        if len(ends) == 2:
            e1, e2 = ends
            third = self.by_start.get(e1)
            if third is not None and third.end == e2 and not _function_word(third.flag) and self.closed(e2):
                return p, e2  # 马兰/英，: a three-character name before punctuation
            if (third is not None and third.end > e2 and e2 < len(self.text) and self.text[e2] in _NON_NAME
                    and e1 in self.bounds):
                return p, e2  # 宋佳/怡和/她: the last character glued to the conjunction after it
        for e in ends:  # jieba found the name as one word, or a surname and a given name
            if self.nr_token(p, e):
                return p, e
        for e in ends:
            token = self.by_start.get(p + s)
            if p in self.bounds and token is not None and token.end == e and token.flag.startswith(("nr", "nz")):
                return p, e
        if len(ends) == 2:
            if e2 in self.bounds and e1 not in self.bounds:
                return p, e2
            if e1 in self.bounds and e2 not in self.bounds:
                return p, e1
            if e1 in self.bounds and e2 in self.bounds:
                return (p, e1) if third is not None and _function_word(third.flag) else (p, e2)
            return None
        e1 = ends[0]
        return (p, e1) if e1 in self.bounds or self.closed(e1) or self.text[e1] in _NON_NAME else None

    def in_address(self, start: int, end: int) -> bool:
        i = bisect.bisect_left(self.address_starts, end) - 1
        return i >= 0 and self.addresses[i][1] > start

    def place_follows(self, pos: int) -> bool:
        """One of the next two words (not a function word) ends like a place (站, 路, 镇)."""
        for _ in range(2):
            token = self.by_start.get(pos)
            if token is None or _function_word(token.flag) or not _is_han(token.word[0]):
                return False
            if _PLACE_AFTER.search(token.word[-1]):
                return True
            pos = token.end
        return False

    def verb_at(self, pos: int) -> bool:
        token = self.by_start.get(pos)
        return token is not None and token.flag.startswith("v") and len(token.word) > 1

    def closed(self, end: int) -> bool:
        """Nothing more of a name can follow: the end of the text or a non-Chinese character."""
        return end >= len(self.text) or not _is_han(self.text[end])

    def backward(self, q: int, need_left: bool) -> tuple[int, int] | None:
        """The name that ends at ``q`` (before 您好 or a title)."""
        candidates = []
        for s, g in ((2, 2), (2, 1), (1, 2), (1, 1)):
            start = q - s - g
            if start < 0 or self.surname_len(start) != s or not self.given_ok(start + s, q):
                continue
            if need_left and not self.left_ok(start):
                continue
            candidates.append(start)
        if not candidates:
            return None
        for start in candidates:
            if self.nr_token(start, q):
                surname = self.by_start.get(start - 1)
                if (start - 1 in candidates and surname is not None and surname.end == start
                        and surname.flag.startswith("nr")):
                    return start - 1, q  # 李/nr 卫东/nr
                return start, q
        on_bounds = [c for c in candidates if c in self.bounds]  # 感谢/李先生: not 谢李
        if not on_bounds:
            return None
        best = min(on_bounds)  # the longest
        if (len(on_bounds) > 1 and q - best == 3 and self.text[best] in _AMBIGUOUS_FIRST
                and self.surname_len(best) == 1):
            best = sorted(on_bounds)[1]
        return best, q

    # -- is it a name? ------------------------------------------------------
    def plausible(self, start: int, end: int, strong: bool) -> bool:
        text = self.text
        word = text[start:end]
        if word in _NOT_NAMES or word.startswith(_TITLES) or self.in_address(start, end):
            return False
        if _PLACE_AFTER.match(text, end):
            return False
        if self.common(word, strong):
            return False
        s = self.surname_len(start)
        if end - start == s + 2:
            prefix = text[start:start + s + 1]
            if (prefix in _NOT_NAMES or self.common(prefix, strong)) and not self.nr_token(start, end):
                return False  # 黄金会员, 高档型, 马上要
        return True

    @staticmethod
    def common(word: str, strong: bool) -> bool:
        freq, tag = _word_freq(word)
        if freq <= _COMMON_FREQ:
            return False
        if tag.startswith("nr"):
            return freq > (_STRONG_NAME_FREQ if strong else _NAME_FREQ)
        return True


# a strong cue says the next word is a name; a weak one only says it may be
_STRONG_CUES = ("我的名字是|我的名字叫|名字是|名字叫|我叫|本人叫|真实姓名|姓名|收件人|收货人|寄件人|联系人|入住人|经办人|"
                "持卡人|乘机人|乘车人|登机人|开户人|开户名|账户名|户名|申请人|预订人|订房人|下单人|机主|户主|旅客|"
                "乘客|客人|签收人|取件人|代办人|被保险人|投保人|负责人|法定代表人|法人|业主|房主|车主|领队|团员|"
                "监护人|账号主体|实名主体|实名人|借款人|收款人|付款人|汇款人|转账给|汇款给|"
                "(?i:receiver|recipient|consignee|contact_?name|full_?name|real_?name|customer_?name|name)")
_WEAK_CUES = ("我是|客户|用户|会员|转告|通知|麻烦|同事|老公|老婆|爱人|妻子|丈夫|女儿|儿子|妈妈|爸爸|母亲|父亲|朋友|"
               "财务|室友|家人")
_CUE = re.compile(
    rf"(?:(?P<strong>{_STRONG_CUES})|(?P<weak>{_WEAK_CUES}))"
    r"(?:信息)?[\s:：\"'“”]{0,4}(?:写的是|填的是|写的|填的|变更为|更改为|改为|换成|是|为|叫|写|填)?"
    r"[\s:：\"'“”]{0,4}"
)
_SURNAME_CUE = re.compile(
    r"(?<!百)姓(?:是|为)?(?P<surname>"
    + "|".join(sorted(COMPOUND_SURNAMES)) + "|[" + "".join(sorted(SINGLE_SURNAMES)) + "])"
    r"(?=[，,。.\s！!、；;：:）)]|$|叫|名|的|单名)"
)
_GREETING_AFTER = re.compile(r"(?:尊敬的|亲爱的|(?:您好|你好|早上好|下午好|晚上好)[，,！!、\s]{0,2})")
_GREETING_BEFORE = re.compile(r"[，,、\s]?(?:您好|你好)")
_TITLE = re.compile("|".join(_TITLE_CUES))


def _person_spans(text: str) -> list[tuple[int, int, float, str]]:
    if not any(ch in SINGLE_SURNAMES or ch in _COMPOUND_FIRST for ch in text):
        return []
    names = _Names(text)
    found: list[tuple[int, int, float, str]] = []

    def add(span: tuple[int, int] | None, score: float, why: str, strong: bool = True) -> None:
        if span is not None and names.plausible(span[0], span[1], strong):
            found.append((span[0], span[1], score, why))

    # 免贵姓张，叫张伟 / 我姓欧阳
    for m in _SURNAME_CUE.finditer(text):
        found.append((m.start("surname"), m.end("surname"), 0.7, "surname disclosed (姓X)"))
        after = re.match(r"[，,\s]{0,2}(?:我叫|叫|名叫|全名)?", text[m.end():])
        p = m.end() + (after.end() if after else 0)
        if text.startswith(m.group("surname"), p):
            add(names.forward(p), 0.85, "name after 姓X")
    # 我叫王小明 / 收件人是李娜 / 客户黄晓明反馈
    for m in _CUE.finditer(text):
        span = names.forward(m.end())
        if span is None:
            continue
        if m.group("strong"):
            add(span, 0.85, f"name after {m.group('strong')}")
            # 入住人是张平和荣婷婷 / 乘机人凌桂兰、皇甫静
            while span is not None and found and found[-1][:2] == span:
                more = re.match(r"[和与及跟、,，/ ]", text[span[1]:span[1] + 1])
                span = names.forward(span[1] + 1) if more else None
                add(span, 0.85, f"name listed after {m.group('strong')}")
        elif (names.end_ok(span[1]) or names.nr_token(*span) or text.startswith("的", span[1])
              or names.verb_at(span[1])):
            add(span, 0.75, f"name after {m.group('weak')}", strong=False)
    # 尊敬的李明 / 您好，陈静
    for m in _GREETING_AFTER.finditer(text):
        span = names.forward(m.end())
        if span is not None and names.end_ok(span[1]):
            add(span, 0.8, "name in a greeting", strong=False)
    # 姚雨您好 / 王小明，您好
    for m in _GREETING_BEFORE.finditer(text):
        if m.start() >= 2:
            add(names.backward(m.start(), need_left=True), 0.8, "name before 您好", strong=False)
    # 张伟先生 / 客人华晶女士
    for m in _TITLE.finditer(text):
        if m.start() >= 2:
            add(names.backward(m.start(), need_left=False), 0.8, f"name before {m.group()}", strong=False)
    # jieba's person-name tag, on a word it does not know as an ordinary word
    # (吴/nr 海涛/nr: a surname and a given name tagged apart are one name)
    tokens = names.tokens
    for i, token in enumerate(tokens):
        if not token.flag.startswith("nr") or token.flag == "nrt":
            continue
        start, end = token.start, token.end
        if (len(token.word) == 1 and i + 1 < len(tokens) and tokens[i + 1].flag.startswith("nr")
                and tokens[i + 1].start == end and len(tokens[i + 1].word) <= 2):
            end = tokens[i + 1].end
        for title in _TITLES:
            if token.word.endswith(title):
                end -= len(title)
                break
        s = names.surname_len(start)
        if not s or not 1 <= end - start - s <= 2 or not names.given_ok(start + s, end):
            continue
        if _word_freq(text[start:end])[0] > _COMMON_FREQ:
            continue
        following = names.by_start.get(end)
        if following is not None and following.flag.startswith(("n", "vn")) and len(following.word) > 1:
            continue  # 戴森/吹风机: a brand before its product
        if (following is not None and following.flag.startswith("q")) or (
                i > 0 and tokens[i - 1].flag == "d" and len(tokens[i - 1].word) > 1):
            continue  # 高速/费开/个: a word cut wrongly, not a name
        if names.place_follows(end):
            continue  # 张江/高/科站: part of a place name
        add((start, end), 0.6, "jieba nr with a known surname", strong=False)
    return found


class ChinesePersonRecognizer(_ZhRecognizer):
    ENTITY = "PERSON"
    NAME = "zh_person"

    def spans(self, text: str) -> Iterable[tuple[int, int, float, str]]:
        return _person_spans(text)


# ---------------------------------------------------------------------------
# CN_LICENSE_PLATE
# ---------------------------------------------------------------------------
PLATE_PROVINCES = "京津沪渝冀豫云辽黑湘皖鲁新苏浙赣鄂桂甘晋蒙陕吉闽贵粤青藏川宁琼"
_PL = "A-HJ-NP-Za-hj-np-z"  # plate letters: no I, no O
_PLATE = re.compile(
    rf"(?<![0-9A-Za-z])[{PLATE_PROVINCES}][{_PL}][·•・‧∙.\- ]?"
    rf"(?P<tail>[{_PL}0-9]{{5,6}}|[{_PL}0-9]{{4}}[学警挂领港澳试超])(?![0-9A-Za-z])"
)
_PLATE_CUE = re.compile(r"车牌|牌照|号牌|车辆|停车|车号")


class ChinesePlateRecognizer(_ZhRecognizer):
    """Mainland licence plates: 京B·55639, 粤A12345, 沪AD12345 (new energy)."""

    ENTITY = "CN_LICENSE_PLATE"
    NAME = "zh_license_plate"

    def spans(self, text: str) -> Iterable[tuple[int, int, float, str]]:
        for m in _PLATE.finditer(text):
            tail = m.group("tail")
            digits = sum(ch.isdigit() for ch in tail)
            if len(tail) == 6 and not re.fullmatch(r"[DFdf][A-Za-z0-9][0-9]{4}|[0-9]{5}[DFdf]", tail):
                continue  # six characters: new-energy plates only
            if digits < 2:
                continue  # 京AB CDE... letters are not a plate
            score = 0.95 if _cue_before(text, m.start(), _PLATE_CUE) else 0.85
            yield m.start(), m.end(), score, "licence plate"


# ---------------------------------------------------------------------------
# CN_RESIDENT_ID
# ---------------------------------------------------------------------------
_D = f"[{_DG}]"
_CK = f"[{_DG}Xx]"
_RESIDENT_ID = re.compile(
    rf"(?<![0-9A-Za-z\uff10-\uff19])(?:{_D}{{17}}{_CK}"
    rf"|{_D}{{6}}(?P<s1>[ \-]){_D}{{8}}(?P=s1){_D}{{3}}{_CK}"
    rf"|{_D}{{6}}(?P<s2>[ \-]){_D}{{4}}(?P=s2){_D}{{4}}(?P=s2){_D}{{3}}{_CK}"
    rf"|{_D}{{4}}(?P<s3>[ \-]){_D}{{4}}(?P=s3){_D}{{4}}(?P=s3){_D}{{4}}(?P=s3){_D}{_CK}"
    rf"|{_D}{{3}}(?P<s4>[ \-]){_D}{{3}}(?P=s4){_D}{{4}}(?P=s4){_D}{{4}}(?P=s4){_D}{{3}}{_CK})"
    rf"(?![0-9A-Za-z\uff10-\uff19])"
)
_ID_PROVINCES = frozenset({11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34, 35, 36, 37, 41, 42, 43, 44, 45, 46,
                           50, 51, 52, 53, 54, 61, 62, 63, 64, 65, 71, 81, 82, 83})
_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CUE = re.compile(r"身份证|证件号|证件号码|身份号码|公民身份|证号|(?i:\bid\b|id ?card|id ?no)")


def resident_id_shape(number: str) -> bool:
    """18 characters with a known province code and a real birth date."""
    if not re.fullmatch(r"[0-9]{17}[0-9X]", number) or int(number[:2]) not in _ID_PROVINCES:
        return False
    year, month, day = int(number[6:10]), int(number[10:12]), int(number[12:14])
    return 1900 <= year <= 2099 and 1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]


def resident_id_checksum(number: str) -> bool:
    """The ISO 7064 MOD 11-2 check character of a resident id holds."""
    total = sum(int(c) * w for c, w in zip(number[:17], _ID_WEIGHTS))
    return "10X98765432"[total % 11] == number[17]


class ChineseResidentIdRecognizer(_ZhRecognizer):
    """Resident identity numbers, grouped (330106 19981225 2758) or not."""

    ENTITY = "CN_RESIDENT_ID"
    NAME = "zh_resident_id"

    def spans(self, text: str) -> Iterable[tuple[int, int, float, str]]:
        for m in _RESIDENT_ID.finditer(text):
            number = re.sub(r"[ \-]", "", _ascii(m.group())).upper()
            if not resident_id_shape(number):
                continue
            cue = _cue_before(text, m.start(), _ID_CUE, 20)
            if resident_id_checksum(number):
                yield m.start(), m.end(), 0.95 if cue else 0.9, "resident id, check character valid"
            elif cue:
                yield m.start(), m.end(), 0.6, "resident id after a cue, check character invalid"


# ---------------------------------------------------------------------------
# PASSPORT_NUMBER
# ---------------------------------------------------------------------------
_PASSPORT = re.compile(r"(?<![0-9A-Za-z])(?:[EeGg][0-9]{8}|[Ee][A-HJ-NP-Za-hj-np-z][0-9]{7}|[PpDdSs][Ee]?[0-9]{7,8})"
                       r"(?![0-9A-Za-z])")
_PASSPORT_CUE = re.compile(r"护照|(?i:passport)|证件|旅行证|通行证")


class ChinesePassportRecognizer(_ZhRecognizer):
    """Chinese passports: E12345678, EA1234567, G12345678; P, D and S forms
    (official, diplomatic, service passports) only after a cue."""

    ENTITY = "PASSPORT_NUMBER"
    NAME = "zh_passport"

    def spans(self, text: str) -> Iterable[tuple[int, int, float, str]]:
        for m in _PASSPORT.finditer(text):
            value = m.group()
            cue = _cue_before(text, m.start(), _PASSPORT_CUE, 20) or _PASSPORT_CUE.match(text, m.end()) is not None
            if cue:
                yield m.start(), m.end(), 0.85, "passport number after a cue"
            elif re.fullmatch(r"E[0-9]{8}", value):
                yield m.start(), m.end(), 0.65, "passport number (E + 8 digits)"
            elif re.fullmatch(r"E[A-HJ-NP-Z][0-9]{7}", value):
                yield m.start(), m.end(), 0.6, "passport number (E + letter + 7 digits)"
            elif re.fullmatch(r"G[0-9]{8}", value):
                yield m.start(), m.end(), 0.55, "passport number (G + 8 digits)"


# ---------------------------------------------------------------------------
# PHONE_NUMBER: landlines (and mobiles the pipeline's ASCII regex misses)
# ---------------------------------------------------------------------------
_SP = "[ \u3000]"
_DASH = "[-－—]"
_AREA = rf"(?:[0０]{_D}{{2,3}})"  # checked in code: 010, 02X, 0[3-9]XX
_LOCAL = rf"(?:[1-9１-９]{_D}{{2,3}}(?:{_SP}|{_DASH})?{_D}{{4}})"
_EXT = rf"(?:{_SP}?(?:转|分机号?|ext\.?|EXT\.?|[xX#]){_SP}?{_D}{{1,5}}|{_DASH}{_D}{{1,5}})?"
_LANDLINE = re.compile(
    rf"(?<![0-9A-Za-z\uff10-\uff19+])(?<![0-9\uff10-\uff19][ \-])(?:"
    rf"[(（]{_SP}?(?P<a1>{_AREA}){_SP}?[)）]{_SP}?{_DASH}?{_SP}?{_LOCAL}"
    rf"|(?P<a2>{_AREA}){_SP}?{_DASH}{_SP}?{_LOCAL}"
    rf"|(?P<a3>{_AREA}){_SP}{_LOCAL}"
    rf"|(?:\+|00|[(（]\+?)86[)）]?[ \-]?(?:[(（]0[)）])?(?P<a4>{_D}{{2,3}})[ \-]?{_LOCAL}"
    rf"|(?P<a5>{_AREA})[2-9２-９]{_D}{{6,7}}"
    rf"){_EXT}(?![0-9A-Za-z\uff10-\uff19])(?![ \-][0-9\uff10-\uff19])"
)
_MOBILE = re.compile(
    rf"(?<![0-9A-Za-z\uff10-\uff19+])(?:(?:\+|00|[(（]\+?)86[)）]?[ \-]?|[+＋]86[ \-]?)?"
    rf"[1１][3-9３-９]{_D}(?:[ \-]?{_D}{{4}}){{2}}(?![0-9A-Za-z\uff10-\uff19])"
)
_PHONE_CUE = re.compile(r"电话|座机|固话|联系方式|致电|拨打|来电|号码|传真|(?i:tel|phone|fax)")


def _area_code_ok(code: str, with_zero: bool) -> bool:
    code = _ascii(code)
    if not with_zero:
        code = "0" + code
    return code == "010" or bool(re.fullmatch(r"02[0-9]|0[3-9][0-9]{2}", code))


class ChineseLandlineRecognizer(_ZhRecognizer):
    """Landlines with an area code (010-12345678, (0571)88889999,
    0571-8888 9999转123, +86 571 8888 9999) and mobiles written with
    full-width digits or a +86 prefix.  Service numbers (400-, 800-, 95xxx)
    are not personal and are left alone."""

    ENTITY = "PHONE_NUMBER"
    NAME = "zh_phone"

    def spans(self, text: str) -> Iterable[tuple[int, int, float, str]]:
        for m in _LANDLINE.finditer(text):
            cue = _cue_before(text, m.start(), _PHONE_CUE, 16)
            if m.group("a5") is not None:  # digits only: a phone only where the text says so
                if cue and _area_code_ok(m.group("a5"), True) and len(_ascii(m.group("a5"))) + 8 >= len(m.group()):
                    yield m.start(), m.end(), 0.7, "landline digits after a phone cue"
                continue
            code = m.group("a1") or m.group("a2") or m.group("a3")
            ok = _area_code_ok(code, True) if code else _area_code_ok(m.group("a4"), False)
            if ok:
                yield m.start(), m.end(), 0.85 if cue else 0.75, "landline with area code"
        for m in _MOBILE.finditer(text):
            yield m.start(), m.end(), 0.85, "mobile number"


# ---------------------------------------------------------------------------
# CREDIT_CARD
# ---------------------------------------------------------------------------
_DIGIT_RUN = re.compile(rf"(?<![0-9A-Za-z.\uff10-\uff19]){_D}+(?:[ \-]{_D}+)*")
_CARD_CUE = re.compile(r"银行卡|卡号|储蓄卡|信用卡|借记卡|银联|(?i:card)|尾号")
_ORDER_CUE = re.compile(r"订单|单号|运单|快递|物流|交易号|流水号|工单|编号|账单号|实例")


class UnionPayCardRecognizer(_ZhRecognizer):
    """UnionPay cards (62, 16 to 19 digits) and 16-digit debit cards starting
    4 or 5, grouped or not: Luhn-valid, or after a card cue (银行卡, 卡号)."""

    ENTITY = "CREDIT_CARD"
    NAME = "zh_bank_card"

    def spans(self, text: str) -> Iterable[tuple[int, int, float, str]]:
        for run in _DIGIT_RUN.finditer(text):
            groups = [(g.start() + run.start(), g.end() + run.start()) for g in re.finditer(_D + "+", run.group())]
            i = 0
            while i < len(groups):
                found = self._card_from(text, groups, i)
                if found is None:
                    i += 1
                    continue
                yield found[:4]
                i = found[4]

    def _card_from(self, text: str, groups: list[tuple[int, int]], i: int):
        best = None
        total = 0
        seps = set()
        for j in range(i, len(groups)):
            s, e = groups[j]
            if j > i:
                seps.add(text[groups[j - 1][1]:s])
                if len(seps) > 1:
                    break
                if e - s < 3 and j + 1 < len(groups):
                    break
            total += e - s
            if total > 19:
                break
            if 16 <= total:
                best = j
        if best is None:
            return None
        for j in range(best, i - 1, -1):  # the longest valid reading first
            start, end = groups[i][0], groups[j][1]
            digits = re.sub(r"[ \-]", "", _ascii(text[start:end]))
            if not 16 <= len(digits) <= 19:
                continue
            if digits.startswith("62"):
                kind = "unionpay"
            elif digits[0] in "45" and len(digits) == 16:
                kind = "debit"
            else:
                continue
            cue = _cue_before(text, start, _CARD_CUE, 20)
            if not cue and _cue_before(text, start, _ORDER_CUE, 12):
                continue  # an order or waybill number that looks like a card
            if len(digits) == 18 and resident_id_shape(digits) and resident_id_checksum(digits) and not cue:
                continue  # a Gansu resident id (62....) is not a card
            if luhn(digits):
                score = 0.85 if (cue or kind == "unionpay") else 0.7
                return start, end, score, f"{kind} card, Luhn valid", j + 1
            if cue:
                return start, end, 0.6, f"{kind} card after a cue, Luhn invalid", j + 1
        return None


# ---------------------------------------------------------------------------
# EMAIL_ADDRESS
# ---------------------------------------------------------------------------
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}[@＠]"
    r"[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63}){0,5}\.[A-Za-z]{2,24}(?![A-Za-z0-9\-])"
)


@functools.lru_cache(maxsize=1024)
def _public_suffix(domain: str) -> bool:
    import tldextract

    from cirrus.offline import use_bundled_suffix_list

    use_bundled_suffix_list()  # never fetch the list
    return bool(tldextract.extract(domain).suffix)


class ChineseEmailRecognizer(_ZhRecognizer):
    """E-mail addresses against Chinese text: ``发我邮箱abc_1@163.com吧``
    gives ``abc_1@163.com`` (Presidio's pattern, whose ``\\w`` matches Chinese
    characters, takes the characters in front too)."""

    ENTITY = "EMAIL_ADDRESS"
    NAME = "zh_email"

    def spans(self, text: str) -> Iterable[tuple[int, int, float, str]]:
        for m in _EMAIL.finditer(text):
            value = m.group()
            local, _, domain = value.replace("＠", "@").rpartition("@")
            if local.endswith(".") or ".." in local or not _public_suffix(domain):
                continue
            yield m.start(), m.end(), 0.95, "e-mail address"


# ---------------------------------------------------------------------------
def chinese_recognizers(language: str = "zh") -> list[EntityRecognizer]:
    """The Chinese recognizers, one per entity, for ``language``."""
    return [
        ChinesePersonRecognizer(supported_language=language),
        ChineseAddressRecognizer(supported_language=language),
        ChinesePlateRecognizer(supported_language=language),
        ChineseResidentIdRecognizer(supported_language=language),
        ChinesePassportRecognizer(supported_language=language),
        ChineseLandlineRecognizer(supported_language=language),
        UnionPayCardRecognizer(supported_language=language),
        ChineseEmailRecognizer(supported_language=language),
    ]
