"""Unit tests of the pure ingest stages: denoise, canonicalize, annotate,
knowledge, task assembly."""

from __future__ import annotations

from cirrus.ingest.annotate.base import ReplyToLabel
from cirrus.ingest.annotate.rules import RuleAnnotator
from cirrus.ingest.canonical import canonicalize
from cirrus.ingest.denoise import Denoiser
from cirrus.ingest.knowledge import KnowledgeBase, rank, select_knowledge
from cirrus.ingest.tasks import Dialogue, build_task
from cirrus.schema import AgentTurn, CustomerTurn, Event, KnowledgeDoc, SourceRef, Ticket


def _ticket(*events: Event) -> Ticket:
    return Ticket("T-9", list(events), SourceRef("t.jsonl", line=1))


# --- denoise -------------------------------------------------------------------

def test_denoise_drops_filler_and_keeps_information(pipeline_config):
    denoise = Denoiser.from_config(pipeline_config.denoise)
    ticket = _ticket(
        Event("system", "Customer joined the chat"),
        Event("agent", "Hello, thank you for contacting Nimbus Cloud support!"),
        Event("customer", "hi"),
        Event("customer", "My instance will not boot"),
        Event("agent", "Are you still there?"),
        Event("customer", "ok"),
        Event("customer", "ok, the ID is i-bp1abc2def3"),
        Event("agent", "Thanks, it is back up. Have a nice day, Ethan!"),
        Event("agent", "You're welcome. Have a nice day, Ethan!"),
        Event("system", "Refund of 20 USD credited to the account"),
    )
    kept = [(e.role, e.text) for e in denoise(ticket).events]
    assert kept == [
        ("customer", "My instance will not boot"),
        ("customer", "ok, the ID is i-bp1abc2def3"),
        ("agent", "Thanks, it is back up. Have a nice day, Ethan!"),
        ("system", "Refund of 20 USD credited to the account"),
    ]


def test_denoise_never_drops_tool_events_or_messages_with_attachments(pipeline_config):
    denoise = Denoiser.from_config(pipeline_config.denoise)
    ticket = _ticket(
        Event("customer", "thanks", ocr=["Error 502 Bad Gateway"]),
        Event("tool_call", call_id="c1", name="Ping", arguments={}),
        Event("tool_result", call_id="c1", content="ok"),
    )
    assert len(denoise(ticket).events) == 3


# --- canonicalize ----------------------------------------------------------------

def test_canonicalize_merges_customers_and_attaches_tool_calls():
    turns = canonicalize(_ticket(
        Event("customer", "Server down"),
        Event("customer", "", ocr=["Connection timed out"]),
        Event("customer", "account 42"),
        Event("agent", "Let me check."),
        Event("tool_call", call_id="c1", name="Describe", arguments={"id": "i-1"}),
        Event("tool_result", call_id="c1", content={"status": "Stopped"}),
        Event("system", "note"),
        Event("agent", "It is stopped; start it."),
        Event("customer", "thanks, done"),
        Event("tool_call", call_id="c2", name="Describe", arguments={"id": "i-1"}),
        Event("tool_result", call_id="c2", content={"status": "Running"}),
    ))
    assert [type(t) for t in turns] == [CustomerTurn, AgentTurn, CustomerTurn, AgentTurn]
    assert turns[0].text == "Server down\n[image text] Connection timed out\naccount 42"
    assert turns[1].texts == ["Let me check.", "It is stopped; start it."]
    assert [(c.name, c.arguments, c.results) for c in turns[1].tool_calls] == [("Describe", {"id": "i-1"}, [{"status": "Stopped"}])]
    assert turns[3].reply == "" and turns[3].tool_calls[0].results == [{"status": "Running"}]


# --- annotate ----------------------------------------------------------------------

def test_rule_annotator_types(pipeline_config):
    rules = RuleAnnotator.from_config(pipeline_config.annotate)
    cases = {
        "Could you please provide the instance ID and the region?": "Inquire",
        "Just to confirm, do you mean the domain example.com or its www subdomain?": "Clarify",
        "I'm so sorry for the trouble this caused.": "Appease",
        "According to our policy, refunds are processed within 5 business days.": "Standard",
        "I have restarted the instance; run `systemctl status nginx` to verify.": "Solution",
        "": "Solution",
    }
    labels = rules.label([ReplyToLabel("q", reply) for reply in cases])
    assert dict(zip(cases, labels)) == cases


def test_rule_annotator_prefers_action_over_follow_up_question(pipeline_config):
    rules = RuleAnnotator.from_config(pipeline_config.annotate)
    reply = ("I have released the security group rule for port 22 and rebooted the instance. Log in again with "
             "ssh root@your-ip and check the sshd service; the auth log should show the accepted key. If it still "
             "fails, could you send me the exact error message?")
    assert rules.label([ReplyToLabel("q", reply, ("AuthorizeSecurityGroup",))]) == ["Solution"]


# --- knowledge -----------------------------------------------------------------------

def _docs(*texts: str) -> list[KnowledgeDoc]:
    return [KnowledgeDoc(f"d{i}", f"Doc {i}", t) for i, t in enumerate(texts)]


def test_rank_keeps_the_five_most_relevant_of_more():
    docs = _docs("refund policy money back", "invoice request", "ssh port 22 security group", "sms template",
                 "disk expansion", "mailbox quota", "ssh key login troubleshooting")
    kept = rank(docs, "I cannot ssh into my server on port 22", 5)
    assert len(kept) == 5
    assert {kept[0].doc_id, kept[1].doc_id} == {"d2", "d6"}


def test_select_knowledge_prefers_ticket_docs_then_kb():
    kb = KnowledgeBase(_docs("refund policy money back", "sms template review rules"))
    own = _docs("custom incident notice")
    assert select_knowledge(own, "refund please", kb, 5) == own
    assert [d.doc_id for d in select_knowledge([], "I want a refund of my money", kb, 5)] == ["d0"]
    assert select_knowledge([], "zzz", kb, 5) == []


# --- task assembly ----------------------------------------------------------------------

def test_build_task_history_checkpoints_and_stats(pipeline_config):
    turns = canonicalize(_ticket(
        Event("agent", "Welcome! Before we start, I looked up your account."),
        Event("tool_call", call_id="c0", name="GetAccount", arguments={"uid": "u-1"}),
        Event("tool_result", call_id="c0", content={"level": "gold"}),
        Event("customer", "My SMS are not delivered"),
        Event("agent", "Which template code do you use?"),
        Event("customer", "SMS_123"),
        Event("tool_call", call_id="c1", name="QuerySmsTemplate", arguments={"template_code": "SMS_123"}),
        Event("tool_result", call_id="c1", content={"status": "rejected"}),
        Event("agent", "The template was rejected; edit its wording and resubmit it."),
        Event("customer", "unanswered last words"),
    ))
    dialogue = Dialogue.split(turns)
    task = build_task(task_id="T-9", category="SMS", channel=None, language="en", dialogue=dialogue, knowledge=[],
                      tools=[], cassette="tool_mocks/T-9.yaml", annotator=RuleAnnotator.from_config(pipeline_config.annotate))
    assert [m["role"] for m in task.history] == ["assistant", "tool", "assistant"]
    assert task.history[0]["tool_calls"][0]["function"]["name"] == "GetAccount"
    assert [(c.index, c.query) for c in task.checkpoints] == [(1, "My SMS are not delivered"), (2, "SMS_123")]
    assert task.checkpoints[1].tool_calls[0].arguments == {"template_code": "SMS_123"}
    assert task.checkpoints[0].reply_type == "Inquire"
    assert task.stats.checkpoints == 2 and task.stats.turns == 5 and task.stats.input_tokens > 20
    assert [c.name for c in dialogue.exchanges()] == ["GetAccount", "QuerySmsTemplate"]
