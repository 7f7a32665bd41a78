"""Canned agent lines learned from the corpus (issue 25, item 1;
docs/canned-lines.md): frequent procedural lines are cut from agent messages
in English and Chinese, informative ones stay, customers are never touched,
a small corpus changes nothing, the manifest records what was decided
without a personal value, and every executor cuts the same lines."""

from __future__ import annotations

import json
import pickle
import random
from pathlib import Path

import pytest

from cirrus.config import CannedLinesConfig, DenoiseConfig, PipelineConfig, load_pipeline
from cirrus.ingest.canned import (
    CannedLines,
    binomial_tail,
    cut_lines,
    find_canned_lines,
    line_key,
    pieces,
)
from cirrus.ingest.denoise import Denoiser
from cirrus.ingest.pipeline import ProcessorFactory
from cirrus.ingest.readers import read_tickets
from cirrus.ingest.run import IngestOptions, canned_lines, run_ingest
from cirrus.schema import Ticket
from tests.conftest import SAMPLE_KB, SAMPLE_RAW, workspace_snapshot

# --- a corpus whose agents paste macros ------------------------------------------

EN_NAMES = ["Sarah", "Jonathan", "Priyanka", "Mateo", "Ingrid", "Kwame"]
ZH_NAMES = ["张伟", "王芳", "李娜", "刘洋", "陈静", "杨磊"]
EN_TOPICS = [  # (what the customer says, an informative line the agents repeat on it, without a digit)
    ("my parcel for order {order} is late, it was due {day}",
     "Late parcels are refunded automatically by the courier."),
    ("the {item} I got in order {order} is scratched", "Scratched items are replaced free of charge."),
    ("please send an invoice for order {order} to my company", "Invoices are issued by our accounts team."),
    ("the {item} in order {order} is the wrong size", "Sizes can be swapped at any of our stores."),
]
ZH_TOPICS = [
    ("我的订单{order}还没发货，{day}能到吗", "偏远地区的包裹由合作快递转运"),
    ("订单{order}的{item}有划痕，怎么处理", "有划痕的商品我们免费换新"),
    ("订单{order}需要开公司发票", "发票由财务同事统一寄出"),
    ("订单{order}的{item}尺码不对，想换大一号", "尺码问题可以到门店直接调换"),
]
EN_SIGNOFF = "Thanks for being an Acme member, we appreciate you! 🌟"  # no hand-written rule names it
ZH_GREETING = "{name}您好，欢迎光临小米粒母婴店，我是客服小美~"  # nor this one
ZH_SIGNOFF = "感谢您对小米粒母婴店的支持，祝您生活愉快~[玫瑰]"


def _values(rng: random.Random, n: int) -> dict[str, str]:
    return {"order": f"{rng.randint(10**9, 10**10 - 1)}", "amount": f"{rng.randint(10, 99)}", "day": f"{n % 27 + 1}",
            "item": rng.choice(["lamp", "kettle", "tent"]), "email": f"user{n}@example.org",
            "phone": f"1{rng.randint(3, 9)}{rng.randint(10**8, 10**9 - 1)}"}


def en_ticket(n: int, rng: random.Random) -> dict:
    values = _values(rng, n)
    name = EN_NAMES[n % len(EN_NAMES)]
    question, policy = EN_TOPICS[n % len(EN_TOPICS)]
    return {"ticket_id": f"EN-{n:03d}", "language": "en", "events": [
        {"role": "customer", "text": question.format(**values)},
        {"role": "agent", "text": f"Hi {name}, thanks for contacting Acme Support! My name is Alex."},
        {"role": "agent", "text": "Let me look into this for you."},
        {"role": "agent", "text": f"Thanks for waiting. I have issued a refund of ${values['amount']} for order "
                                  f"{values['order']} and sent the label to {values['email']}. "
                                  "Is there anything else I can help you with?"},
        {"role": "agent", "text": policy},
        {"role": "customer", "text": "no that's all, thanks"},
        {"role": "agent", "text": f"You're welcome, {name}! {EN_SIGNOFF}"},
    ]}


def zh_ticket(n: int, rng: random.Random) -> dict:
    values = _values(rng, n)
    name = ZH_NAMES[n % len(ZH_NAMES)]
    question, policy = ZH_TOPICS[n % len(ZH_TOPICS)]
    return {"ticket_id": f"ZH-{n:03d}", "language": "zh", "events": [
        {"role": "customer", "text": question.format(**values).replace("lamp", "台灯").replace("kettle", "水壶")
                                                                    .replace("tent", "帐篷")},
        {"role": "agent", "text": ZH_GREETING.format(name=name)},
        {"role": "agent", "text": f"亲，让您久等了，已为您退款{values['amount']}元，请留意手机{values['phone']}的短信，"
                                  "感谢您对小米粒母婴店的支持，祝您生活愉快~[玫瑰]"},
        {"role": "agent", "text": policy},
        {"role": "customer", "text": "好的谢谢"},
        {"role": "agent", "text": ZH_SIGNOFF},
    ]}


def corpus(tickets: int = 40, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    return [en_ticket(n, rng) for n in range(tickets)] + [zh_ticket(n, rng) for n in range(tickets)]


def write_corpus(path: Path, tickets: list[dict]) -> Path:
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tickets), encoding="utf-8")
    return path


def small_corpus_pipeline(**corpus_settings) -> PipelineConfig:
    """The default pipeline with ``[denoise.corpus]`` (and the Chinese one)
    set for a corpus of a few dozen tickets."""
    base = load_pipeline()
    settings = CannedLinesConfig(**{"min_corpus_tickets": 20, "list_min_tickets": 5, **corpus_settings})
    languages = {code: section.model_copy(update={"denoise": section.denoise.model_copy(update={"corpus": settings})})
                 if section.denoise is not None else section for code, section in base.languages.items()}
    return base.model_copy(update={"denoise": base.denoise.model_copy(update={"corpus": settings}),
                                   "languages": languages})


def tickets_of(path: Path) -> list[Ticket]:
    return [t for t in read_tickets(path) if isinstance(t, Ticket)]


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("canned") / "chats.jsonl", corpus())


@pytest.fixture(scope="module")
def pipeline() -> PipelineConfig:
    return small_corpus_pipeline()


@pytest.fixture(scope="module")
def found(raw: Path, pipeline: PipelineConfig) -> CannedLines:
    tickets = tickets_of(raw)
    canned = find_canned_lines(lambda: tickets, pipeline)
    assert canned is not None
    return canned


def denoised(ticket: Ticket, pipeline: PipelineConfig, canned: CannedLines) -> list[tuple[str, str]]:
    language = ticket.language
    denoiser = Denoiser.from_config(pipeline.denoise_for(language), cut_lines=canned.cutter(language))
    return [(e.role, e.text) for e in denoiser(ticket).events]


# --- what is cut and what stays ----------------------------------------------------


def test_frequent_procedural_lines_are_cut_from_english_agent_messages(raw, pipeline, found):
    ticket = tickets_of(raw)[5]
    agent = [text for role, text in denoised(ticket, pipeline, found) if role == "agent"]
    answer = ticket.events[3].text.removeprefix("Thanks for waiting. ").removesuffix(
        " Is there anything else I can help you with?")
    assert answer.startswith("I have issued a refund of $") and answer.endswith("@example.org.")
    # greeting, hold, "thanks for waiting", "anything else?", "you're welcome" and the sign-off are gone
    assert agent == [answer, EN_TOPICS[5 % 4][1]]
    text = " ".join(agent)
    for canned in ("thanks for contacting", "Let me look", "Thanks for waiting", "anything else", "welcome", "member"):
        assert canned not in text
    decisions = {line.key: line for line in found.lines if line.language == "en"}
    signoff = decisions[line_key("Thanks for being an Acme member, we appreciate you!")]
    assert signoff.procedural and signoff.reason == "dialogue edge" and signoff.tickets == 40


def test_frequent_procedural_lines_are_cut_from_chinese_agent_messages(raw, pipeline, found):
    ticket = tickets_of(raw)[40 + 3]
    agent = [text for role, text in denoised(ticket, pipeline, found) if role == "agent"]
    amount = ticket.events[2].text.split("已为您退款")[1].split("元")[0]
    phone = ticket.events[2].text.split("请留意手机")[1].split("的短信")[0]
    # the greeting with the shop's name, "让您久等了" and the glued sign-off are gone; the answer stays
    assert agent == [f"已为您退款{amount}元，请留意手机{phone}的短信~", ZH_TOPICS[3][1]]
    decisions = {line.key: line for line in found.lines if line.language == "zh"}
    assert decisions[line_key("欢迎光临小米粒母婴店")].procedural
    assert decisions[line_key("感谢您对小米粒母婴店的支持，祝您生活愉快")].procedural


def test_informative_frequent_lines_stay(raw, pipeline, found):
    decisions = {line.key: line for line in found.lines}
    reasons = []
    for _, policy in EN_TOPICS + ZH_TOPICS:  # in a quarter of the tickets each, not a digit in them
        line = decisions[line_key(policy)]
        assert not line.procedural and line.tickets == 10, line
        reasons.append(line.reason)
    # "are refunded" is a state (a [select] verify rule); the others answer one kind of question
    assert reasons == ["answers"] + ["one topic"] * 7
    for ticket in tickets_of(raw):
        policy = (EN_TOPICS if ticket.language == "en" else ZH_TOPICS)[int(ticket.ticket_id[3:]) % 4][1]
        assert policy in [text for _, text in denoised(ticket, pipeline, found)]


def test_a_line_inside_a_longer_message_is_cut_and_the_rest_kept():
    procedural = frozenset(line_key(t) for t in ("Thanks for waiting", "Anything else I can help with?",
                                                 "让您久等了", "祝您生活愉快"))
    assert cut_lines("Thanks for waiting. Your refund of $20 was issued. Anything else I can help with?",
                     procedural) == "Your refund of $20 was issued."
    # a clause glued to the answer: cut from the sentence's edge, the answer capitalised and closed
    assert cut_lines("Thanks for waiting, your refund of $20 was issued, anything else I can help with?",
                     procedural) == "Your refund of $20 was issued."
    assert cut_lines("好的亲，让您久等了，已经为您退款，祝您生活愉快！", procedural | {line_key("好的")}) == "已经为您退款！"
    # nothing canned: the very same text; only canned: nothing
    assert cut_lines("Your refund was issued.", procedural) == "Your refund was issued."
    assert cut_lines("让您久等了~[微笑]", procedural) == ""
    # a canned clause in the middle of a sentence is left alone (cutting it would break the sentence)
    assert cut_lines("Your refund, thanks for waiting, was issued.", procedural) == \
        "Your refund, thanks for waiting, was issued."


def test_customer_messages_are_never_cut(tmp_path, pipeline):
    tickets = corpus()
    for ticket in tickets[:10]:  # customers who say the agents' sign-off word for word
        ticket["events"].insert(-1, {"role": "customer", "text": EN_SIGNOFF})
    parsed = tickets_of(write_corpus(tmp_path / "chats.jsonl", tickets))
    canned = find_canned_lines(lambda: parsed, pipeline)
    assert canned is not None and canned.cutter("en") is not None
    for ticket in parsed:
        rules_alone = Denoiser.from_config(pipeline.denoise_for(ticket.language))
        customers = [e.text for e in rules_alone(ticket).events if e.role == "customer"]
        assert [text for role, text in denoised(ticket, pipeline, canned) if role == "customer"] == customers
    assert EN_SIGNOFF in [text for role, text in denoised(parsed[0], pipeline, canned) if role == "customer"]


def test_below_the_minimum_corpus_size_nothing_changes(raw, tmp_path):
    tickets = tickets_of(raw)
    assert find_canned_lines(lambda: tickets, load_pipeline()) is None  # 40 tickets a language < 200
    assert find_canned_lines(lambda: tickets, small_corpus_pipeline(min_corpus_tickets=41)) is None
    assert find_canned_lines(lambda: tickets, small_corpus_pipeline(enabled=False)) is None
    # the sample workspace: nothing read is frequent enough, the pass is off, no manifest key
    options = IngestOptions(raw_path=SAMPLE_RAW, workspace=tmp_path, pipeline=load_pipeline(), kb_dir=SAMPLE_KB)
    assert canned_lines(options) is None


def test_the_default_corpus_settings_keep_the_config_hash():
    default = load_pipeline()
    assert "corpus" not in DenoiseConfig().model_dump()
    explicit = default.model_copy(update={"denoise": default.denoise.model_copy(
        update={"corpus": CannedLinesConfig()})})
    assert explicit.config_hash() == default.config_hash()
    assert small_corpus_pipeline().config_hash() != default.config_hash()


def test_the_decision_set_pickles_for_the_workers(found, pipeline):
    again = pickle.loads(pickle.dumps(ProcessorFactory(pipeline, canned=found)))
    assert again.canned == found
    assert again.canned.cutter("zh") == found.cutter("zh")


# --- the pure parts ------------------------------------------------------------------


def test_pieces_give_the_message_back_and_keep_numbers_and_list_markers_whole():
    for text in ("Thanks for waiting. Your refund of $1,500.00 went to t.tt today!  Anything else?",
                 "亲，您好~[微笑]请问有什么可以帮您？\n1. Change of plan\n2. Other reasons (^_^) ok",
                 "", "。。。", "no punctuation at all"):
        assert "".join(p.text + p.end for p in pieces(text)) == text
    assert [p.text for p in pieces("It costs $1,500.00 now.\n2. Airline cancelled flight")] == \
        ["It costs $1,500.00 now", "2. Airline cancelled flight"]


def test_keys_replace_values_and_names_by_slots():
    assert line_key("Hi Sarah, thanks for contacting Acme Support!") == "hi <v> thanks for contacting"
    assert line_key("hi JOHN!!") == line_key("Hi john") == "hi john"  # a lower-case name is no name
    assert line_key("Your order 12345 ships in 3-5 days.") == "your order # ships in # days"
    assert line_key("吴婷您好，我是客服小美，很高兴为您服务~[玫瑰]") == "您好 我是 <v> 很高兴为您服务"
    assert line_key("王**先生，祝您生活愉快！😊") == "祝您生活愉快"
    assert line_key("Ja*** 157****3190 <PERSON_1> {name} bob@example.com") == ""
    assert line_key("- **Insurance:** No") == "insurance"


def test_binomial_tail():
    assert binomial_tail(0, 5, 0.3) == 1.0
    assert binomial_tail(5, 5, 0.5) == pytest.approx(1 / 32)
    assert binomial_tail(3, 10, 0.2) == pytest.approx(0.3222, abs=1e-4)


# --- the workspace ------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_workspace(tmp_path_factory, raw, pipeline) -> Path:
    workspace = tmp_path_factory.mktemp("local") / "ws"
    run_ingest(IngestOptions(raw_path=raw, workspace=workspace, pipeline=pipeline, jobs=2, progress=False))
    return workspace


def test_the_manifest_records_each_frequent_line_its_frequency_and_the_decision(local_workspace):
    manifest = json.loads((local_workspace / "tickets" / "manifest.json").read_text())
    entry = manifest["canned_lines"]["languages"]
    assert set(entry) == {"en", "zh"}
    english = entry["en"]
    assert english["tickets_counted"] == 40 and english["thresholds"]["min_corpus_tickets"] == 20
    by_line = {line["line"]: line for line in english["lines"]}
    signoff = by_line["thanks for being an <v> member we appreciate you"]
    assert signoff == {"line": "thanks for being an <v> member we appreciate you", "tickets": 40, "share": 1.0,
                       "edge_share": 1.0, "decision": "procedural", "reason": "dialogue edge"}
    assert by_line["late parcels are refunded automatically by the courier"]["decision"] == "informative"
    assert english["frequent"] == len(english["lines"]) + sum(english["unlisted"].values())
    tasks = (local_workspace / "tickets" / "tasks.jsonl").read_text()
    for canned in ("thanks for contacting", "Thanks for waiting", "anything else", "Acme member", "欢迎光临", "祝您生活愉快"):
        assert canned not in tasks
    assert "Late parcels are refunded automatically by the courier." in tasks


def test_values_that_look_personal_never_reach_the_manifest(local_workspace, raw):
    canned = json.dumps(json.loads((local_workspace / "tickets" / "manifest.json").read_text())["canned_lines"],
                        ensure_ascii=False)
    personal = set(EN_NAMES + ZH_NAMES) | {"小美", "Alex"}
    for ticket in (json.loads(line) for line in raw.read_text(encoding="utf-8").splitlines()):
        text = " ".join(e["text"] for e in ticket["events"])
        personal |= {word for word in text.replace("，", " ").replace("。", " ").split()
                     if sum(ch.isdigit() for ch in word) >= 5 or "@" in word}  # ids, phones, e-mails
    personal |= {"@", "example.org"}
    leaked = sorted(value for value in personal if value in canned or value.lower() in canned)
    assert leaked == []
    assert all(not any(ch.isdigit() for ch in line["line"])
               for entry in json.loads(canned)["languages"].values() for line in entry["lines"])


def test_a_manifest_lists_a_line_only_from_list_min_tickets(raw, tmp_path):
    tickets = tickets_of(raw)
    canned = find_canned_lines(lambda: tickets, small_corpus_pipeline(list_min_tickets=41, list_max_lines=3))
    assert canned is not None
    for entry in canned.to_manifest()["languages"].values():
        assert entry["lines"] == [] and sum(entry["unlisted"].values()) == entry["frequent"] > 0


@pytest.fixture(scope="module")
def one_process_workspace(tmp_path_factory, raw, pipeline) -> Path:
    """What the local executor writes with one process (jobs=1: no worker
    processes, the models load in this one)."""
    workspace = tmp_path_factory.mktemp("serial") / "ws"
    run_ingest(IngestOptions(raw_path=raw, workspace=workspace, pipeline=pipeline, jobs=1, progress=False))
    return workspace


@pytest.mark.xdist_group("ray")
def test_ray_and_one_local_process_cut_the_same_lines(tmp_path, raw, pipeline, one_process_workspace, shared_ray,
                                                       monkeypatch):
    # two actors on the Ray the Ray tests share (conftest); the next test shows one local process
    # and the local pool agree, so all three executors cut the same lines
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    workspace = tmp_path / "ray"
    run_ingest(IngestOptions(raw_path=raw, workspace=workspace, pipeline=pipeline, jobs=2, executor="ray",
                             progress=False))
    assert workspace_snapshot(workspace) == workspace_snapshot(one_process_workspace)


def test_one_local_process_and_the_local_pool_cut_the_same_lines(local_workspace, one_process_workspace):
    assert workspace_snapshot(one_process_workspace) == workspace_snapshot(local_workspace)


def test_a_batched_ingest_cuts_the_lines_an_online_one_cuts(tmp_path, monkeypatch):
    """``ingest --batch`` runs ingest twice (requests, then answers): both
    passes find the same lines, so the tasks come out as an online run's."""
    from typer.testing import CliRunner

    from cirrus.cli import app
    from tests.batch_server import BatchServer, reply

    monkeypatch.setenv("CIRRUS_CANNED_BATCH_KEY", "sk-canned-batch-test-0000000000")
    monkeypatch.setenv("CIRRUS_BATCH_POLL_S", "0")
    raw = write_corpus(tmp_path / "chats.jsonl", corpus(tickets=24))
    pipeline = tmp_path / "pipeline.toml"  # the default one, with the corpus pass on from 20 tickets
    pipeline.write_text((Path(__file__).resolve().parents[1] / "pipelines" / "default.toml").read_text(encoding="utf-8")
                        + "\n[denoise.corpus]\nmin_corpus_tickets = 20\n\n[languages.zh.denoise.corpus]\n"
                        "min_corpus_tickets = 20\n", encoding="utf-8")

    def labels(body: dict) -> object:
        return reply(json.dumps({"labels": ["Solution"] * body["messages"][-1]["content"].count("### Reply ")}))

    with BatchServer(labels) as server:
        for name, extra in (("online", []), ("batched", ["--batch"])):
            done = CliRunner().invoke(app, ["ingest", str(raw), "-w", str(tmp_path / name), "--jobs", "1", "-q",
                                            "--pipeline", str(pipeline), "--annotator-model", "annot",
                                            "--annotator-base-url", server.base_url,
                                            "--annotator-api-key-env", "CIRRUS_CANNED_BATCH_KEY", *extra])
            assert done.exit_code == 0, done.output
    tasks = (tmp_path / "batched" / "tickets" / "tasks.jsonl").read_text(encoding="utf-8")
    assert tasks == (tmp_path / "online" / "tickets" / "tasks.jsonl").read_text(encoding="utf-8")
    assert "Acme member" not in tasks and "欢迎光临" not in tasks and "Late parcels are refunded" in tasks
    manifests = [json.loads((tmp_path / name / "tickets" / "manifest.json").read_text())
                 for name in ("online", "batched")]
    assert manifests[0]["canned_lines"] == manifests[1]["canned_lines"]
