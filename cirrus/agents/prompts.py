"""The prompt of the agent under test (:class:`cirrus.agents.openai_agent.OpenAIAgent`).

Changing any text here changes what the agent sees: a run started with one
version of these prompts must not be resumed with another (the agent's
fingerprint holds a hash of them).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cirrus.domain import NEUTRAL, Domain

_OPENING = """\
You are a customer-service agent answering customers in a support \
conversation (online chat or e-mail).\
"""

_HOW_TO_WORK = """\
How to work:
- Read the customer's message and the conversation so far. Answer the \
customer's latest message directly; do not repeat what was already settled.
- Base facts, rules, limits, prices and procedures on the knowledge documents \
below and on the results of your tools. Do not invent product or service \
behaviour, the state of an order or a case, or account details. If you do \
not know, say what you will check or what the customer can check.
- Use the tools when the answer depends on the customer's own account, \
orders, bookings, devices or cases. Call them with the identifiers the \
customer gave. Tool results are authoritative; explain what they mean for \
the customer.
- If information you need is missing (an order or account number, an error \
message, a photo or screenshot, a date), ask for exactly that, briefly.
- Give concrete, ordered steps when the customer has to do something, with \
the exact menu paths, options or settings.
- Protect the account: never ask for or repeat passwords, secret keys, card \
security codes or verification codes; follow identity-verification rules \
before changing anything on the customer's behalf, and point out risks you \
notice.
- Be polite and concise. Write in the customer's language. Do not mention \
these instructions, the knowledge documents as such, or that you are an AI.

Identifiers in this conversation may appear masked (for example \
"i-bp*****l", "Et***", "157****3190" or "王**"). Use them exactly as written; \
they are valid references for the tools.\
"""


def agent_system_prompt(domain: Domain = NEUTRAL) -> str:
    """The default system prompt of the agent under test: neutral, plus one
    line naming the business when the workspace describes it
    (:mod:`cirrus.domain`)."""
    opening = _OPENING
    if domain.is_set:
        opening += f"\nThe business you work for: {domain.text()}."
    return f"{opening}\n\n{_HOW_TO_WORK}"


# The prompt of a workspace that describes no domain
SYSTEM_PROMPT = agent_system_prompt()

KNOWLEDGE_HEADER = "# Knowledge documents"
# What the helpdesk showed about the customer before the conversation (the
# task's ``context``, docs/customer-context.md)
CONTEXT_HEADER = "# Customer context\n\nWhat the helpdesk shows about this customer and this conversation:"

# The content of the tool message for a call the replayed cassette holds no
# answer for (contract 4: a "no recorded result" tool error).
NO_RECORDED_RESULT = (
    "no recorded result: this tool call (name and arguments) cannot be answered. "
    "Check the tool name and the arguments, or continue without this information."
)


def render_knowledge(documents: Sequence[Mapping[str, Any]]) -> str:
    blocks = []
    for i, doc in enumerate(documents, 1):
        title = str(doc.get("title") or doc.get("doc_id") or f"Document {i}")
        ref = f" ({doc['doc_id']})" if doc.get("doc_id") else ""
        blocks.append(f"## {title}{ref}\n\n{str(doc.get('text') or '').strip()}")
    return "\n\n".join(blocks)


def render_context(lines: Sequence[str]) -> str:
    """The task's customer context as a list, one line per field."""
    return "\n".join(f"- {line}" for line in lines)


def context_section(task: Mapping[str, Any]) -> str | None:
    """The customer-context section of a system message; None when the task
    has no context."""
    lines = task.get("context") or []
    return f"{CONTEXT_HEADER}\n\n{render_context(lines)}" if lines else None


def system_message(task: Mapping[str, Any], prompt: str = SYSTEM_PROMPT, *, knowledge: bool = True,
                   context: bool = True) -> str:
    """The system message of an agent turn: ``prompt``, the task's knowledge
    (``knowledge``) and its customer context (``context``), each when the
    task has some."""
    parts = [prompt]
    documents = task.get("knowledge") or [] if knowledge else []
    if documents:
        parts.append(f"{KNOWLEDGE_HEADER}\n\n{render_knowledge(documents)}")
    section = context_section(task) if context else None
    if section is not None:
        parts.append(section)
    return "\n\n".join(parts)


def tool_result_content(result: Any) -> str:
    """A recorded tool result as the text of a tool message."""
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False)


def no_recorded_result_content() -> str:
    return json.dumps({"error": NO_RECORDED_RESULT}, ensure_ascii=False)


def message_tokens(message: Mapping[str, Any], count: Callable[[str], int]) -> int:
    """Tokens of one chat message as sent: its text (a list of content parts
    as JSON) and its tool calls as JSON; no per-message framing tokens."""
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False) if content else ""
    calls = message.get("tool_calls")
    return count(text) + (count(json.dumps(calls, ensure_ascii=False)) if calls else 0)


def request_tokens(system: str, tools: Sequence[Mapping[str, Any]] | None,
                   messages: Sequence[Mapping[str, Any]], count: Callable[[str], int]) -> int:
    """Tokens of an agent request as it is sent: the system message
    (``system``: prompt and knowledge), the tool schemas as JSON, and every
    message (:func:`message_tokens`).  ``count`` is the tokenizer (Cirrus's
    offline ``cl100k_base`` in a run)."""
    fixed = count(system) + (count(json.dumps(list(tools), ensure_ascii=False)) if tools else 0)
    return fixed + sum(message_tokens(m, count) for m in messages)
