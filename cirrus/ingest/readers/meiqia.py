"""Meiqia (美洽) online-chat conversations (对话), a Chinese helpdesk.

Conversation fields follow Meiqia's public API documentation, "APIs V2.0",
对话模型 (https://meiqia.com/help/article/apiv2-0): ``conv_id`` (对话唯一标识),
``conv_start_tm`` / ``conv_end_tm`` (对话的创建 / 结束时间), ``conv_content``
(对话的消息), ``agent_nick_name`` / ``agent_name``, ``group_name`` (客服组),
``visitor_tags``, ``conv_agent_msg_count``, ``conv_visitor_msg_count``.
That page lists the conversation model; the fields of one message in
``conv_content`` are taken from answers of that API as public client code
stores them (e.g. ``{"from": "agent", "timestamp": "2017-04-20
10:42:35.494490", "content": "..."}``, with ``content_type`` text, photo,
file, ...): ``from`` (client 顾客, agent 客服, system 系统), ``timestamp``,
``content``, ``content_type``.  Saved conversation lists
``{"result": [...]}`` are split by :mod:`files`.

Roles: ``client`` is the ``customer``, ``agent`` the ``agent``; ``system``
and robot messages (``robot``, ``bot``) are ``system`` events.  A message
that is not text (a photo, a file, a voice or video clip) becomes a short
placeholder such as ``[图片]``, the way chat logs show it, unless it carries
``ocr_text``; rich-text (HTML) messages become plain text.  Times are
Meiqia's local clock, written ISO-8601 without a zone.  Status: an ended
conversation (``conv_end_tm``) counts as resolved, an ongoing one as open;
channel: ``main_channel``, else ``platform``; category: ``group_name``.
"""

from __future__ import annotations

from typing import Any

from cirrus.ingest.readers._common import as_dict, as_list, role_name, show
from cirrus.ingest.readers._export import (
    export_ticket,
    ocr_texts,
    opt_text,
    record_id,
    status_word,
    timestamp,
    vendor_of,
)
from cirrus.ingest.readers.html_text import html_to_text, looks_like_html
from cirrus.schema import Event, SourceRef, Ticket, TicketError

NAME = "meiqia"

ROLES = {"client": "customer", "visitor": "customer", "agent": "agent", "system": "system", "robot": "system",
         "bot": "system"}
PLACEHOLDERS = {"photo": "[图片]", "image": "[图片]", "file": "[文件]", "audio": "[语音]", "voice": "[语音]",
                "video": "[视频]"}


def detect(payload: Any) -> bool:
    return vendor_of(payload) == NAME


def parse(payload: Any, origin: SourceRef) -> Ticket:
    conversation = as_dict(payload, "conversation", None)
    ticket_id = record_id(conversation, "conv_id", NAME)
    content = conversation.get("conv_content")
    if content is None:
        raise TicketError("missing conv_content", ticket_id)
    events = [_message(raw, f"conv_content[{i}]", ticket_id)
              for i, raw in enumerate(as_list(content, "conv_content", ticket_id))]
    if not events:
        raise TicketError("conv_content is empty", ticket_id)

    status = status_word(conversation.get("status"), "status", ticket_id)
    if status is None:
        ended = timestamp(conversation.get("conv_end_tm"), "conv_end_tm", ticket_id)
        status = "resolved" if ended else "open"
    return export_ticket(
        ticket_id, events, origin,
        status=status,
        channel=opt_text(conversation, "main_channel", ticket_id) or opt_text(conversation, "platform", ticket_id),
        category=opt_text(conversation, "group_name", ticket_id),
    )


def _message(raw: Any, where: str, ticket_id: str) -> Event:
    message = as_dict(raw, where, ticket_id)
    sender = message.get("from")
    if sender is None:
        raise TicketError(f"{where}: missing from", ticket_id)
    role = ROLES.get(role_name(sender)) if isinstance(sender, str) else None
    if role is None:
        raise TicketError(f"{where}: unknown from {show(sender)}", ticket_id)
    text = message.get("content")
    if text is not None and not isinstance(text, str):
        raise TicketError(f"{where}.content must be a string", ticket_id)
    kind = message.get("content_type")
    kind = kind.strip().lower() if isinstance(kind, str) and kind.strip() else "text"
    ocr = ocr_texts(message.get("attachments"), where, ticket_id) if role == "customer" else []
    if isinstance(message.get("ocr_text"), str) and message["ocr_text"].strip() and role == "customer":
        ocr.append(message["ocr_text"])
    if kind == "text":
        text = html_to_text(text) if text and looks_like_html(text) else (text or "").strip()
    else:
        text = PLACEHOLDERS.get(kind, "[附件]")
    return Event(role, text=text, ts=timestamp(message.get("timestamp"), f"{where}.timestamp", ticket_id), ocr=ocr)
