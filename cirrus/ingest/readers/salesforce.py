"""Salesforce Cases with their emails, case comments and case feed.

A record is a Case as the REST API's SOQL query answers it
(https://developer.salesforce.com/docs/platform/api-rest/guide/resources-query.md,
and "Understanding Query Results" in the SOQL and SOSL guide for the shape
of parent-to-child subqueries: ``{"attributes": {"type": "Case", ...}, ...,
"EmailMessages": {"totalSize": 1, "done": true, "records": [...]}}``), for
example ``SELECT Id, CaseNumber, Subject, Description, Status, IsClosed,
Origin, Type, Reason, CreatedDate, (SELECT Incoming, TextBody, HtmlBody,
MessageDate, Status FROM EmailMessages), (SELECT CommentBody, IsPublished,
CreatedDate, CreatedBy.UserType FROM CaseComments), (SELECT Type, Body,
IsRichText, Visibility, CreatedDate, CreatedBy.UserType FROM Feeds) FROM
Case``.  A child list may also be a plain JSON list.  Field names follow the
Object Reference for the Salesforce Platform:

- Case: ``Id``, ``CaseNumber``, ``Subject``, ``Description``, ``Status``,
  ``IsClosed``, ``Origin``, ``Type``, ``Reason``, ``CreatedDate``.
- EmailMessage,
  https://developer.salesforce.com/docs/atlas.en-us.object_reference.meta/object_reference/sforce_api_objects_emailmessage.htm :
  ``Incoming`` (true: received from the customer), ``TextBody``,
  ``HtmlBody``, ``MessageDate``, ``CreatedDate``, ``Status`` (5: draft).
- CaseComment,
  https://developer.salesforce.com/docs/atlas.en-us.api.meta/api/sforce_api_objects_casecomment.htm :
  ``CommentBody``, ``IsPublished`` (false: internal), ``CreatedDate``.
- CaseFeed / FeedItem (the StandardObjectNameFeed model): ``Type``
  (TextPost, EmailMessageEvent, CaseCommentPost, TrackedChange, ...),
  ``Body``, ``IsRichText``, ``Visibility`` (AllUsers, InternalUsers),
  ``CreatedDate``.
- User: ``UserType`` (Standard for staff; PowerCustomerSuccess,
  CustomerSuccess, CspLitePortal, CsnOnly, Guest for customers in a portal
  or Experience Cloud site), read from ``CreatedBy.UserType``.

Roles: incoming emails are the ``customer``'s, outgoing ones the
``agent``'s; drafts are dropped.  A comment or feed post that is internal
(``IsPublished`` false, ``Visibility`` InternalUsers) or does not say it is
public is a ``system`` event, never an agent reply; a public one is the
customer's when its author is a portal user, else the agent's.  Feed items
that repeat an email or a case comment (EmailMessageEvent, CaseCommentPost)
are dropped when those lists are there; other feed entries (status changes,
logged calls) are ``system``.  The Description opens the case as the
customer's message unless an incoming email already holds it
(email-to-case).  Everything is put in time order.  Status: ``IsClosed`` or
a closed/solved/resolved word make ``resolved``; channel: ``Origin``;
category: ``Type``, else ``Reason``.
"""

from __future__ import annotations

from typing import Any

from cirrus.ingest.readers._common import as_dict, as_list, id_str
from cirrus.ingest.readers._export import (
    body_text,
    export_ticket,
    flag,
    ocr_texts,
    opt_text,
    status_word,
    timestamp,
    vendor_of,
)
from cirrus.schema import Event, SourceRef, Ticket, TicketError

NAME = "salesforce"

CUSTOMER_USER_TYPES = frozenset({"PowerCustomerSuccess", "CustomerSuccess", "CspLitePortal", "CsnOnly", "Guest"})
_POSTS = frozenset({"TextPost", "ContentPost", "LinkPost", "QuestionPost", "SocialPost", "CaseCommentPost"})
_DRAFT = ("5", "Draft")


def detect(payload: Any) -> bool:
    return vendor_of(payload) == NAME


def parse(payload: Any, origin: SourceRef) -> Ticket:
    case = as_dict(payload, "case", None)
    key = "CaseNumber" if case.get("CaseNumber") is not None else "Id"
    if case.get(key) is None:
        raise TicketError("missing CaseNumber and Id")
    ticket_id = f"{NAME}-{id_str(case[key], key)}"

    emails = _children(case, "EmailMessages", ticket_id)
    comments = _children(case, "CaseComments", ticket_id)
    feed = _children(case, "Feeds", ticket_id)
    if feed is None:
        feed = _children(case, "FeedItems", ticket_id)

    events = [_email(raw, f"EmailMessages[{i}]", ticket_id) for i, raw in enumerate(emails or [])]
    events = [event for event in events if event is not None]
    events += [_comment(raw, f"CaseComments[{i}]", ticket_id) for i, raw in enumerate(comments or [])]
    for i, raw in enumerate(feed or []):
        event = _feed_item(raw, f"Feeds[{i}]", ticket_id, emails is not None, comments is not None)
        if event is not None:
            events.append(event)

    description = body_text(case, ("Description",), (), "case", ticket_id)
    if description and not _already_emailed(description, events):
        events.insert(0, Event("customer", text=description,
                               ts=timestamp(case.get("CreatedDate"), "CreatedDate", ticket_id)))
    if not events:
        raise TicketError("no Description, emails, comments or feed posts", ticket_id)

    closed = flag(case, "IsClosed", "case", ticket_id, None)
    status = status_word(case.get("Status"), "Status", ticket_id)
    origin_field = opt_text(case, "Origin", ticket_id)
    return export_ticket(
        ticket_id, events, origin,
        status="resolved" if closed else status,
        channel=origin_field.strip().lower() if origin_field else None,
        category=opt_text(case, "Type", ticket_id) or opt_text(case, "Reason", ticket_id),
        subject=opt_text(case, "Subject", ticket_id),
    )


def _children(case: dict[str, Any], key: str, ticket_id: str) -> list[Any] | None:
    """A child relationship's records: ``{"records": [...]}`` as a query
    answers it, or a list; None when the case does not carry it."""
    value = case.get(key)
    if value is None:
        return None
    if isinstance(value, dict):
        return as_list(value.get("records") or [], f"{key}.records", ticket_id)
    return as_list(value, key, ticket_id)


def _user_type(record: dict[str, Any]) -> str | None:
    created_by = record.get("CreatedBy")
    user_type = created_by.get("UserType") if isinstance(created_by, dict) else None
    return user_type if isinstance(user_type, str) else None


def _email(raw: Any, where: str, ticket_id: str) -> Event | None:
    email = as_dict(raw, where, ticket_id)
    if str(email.get("Status")) in _DRAFT:
        return None  # never sent
    incoming = flag(email, "Incoming", where, ticket_id, None)
    if incoming is None:
        raise TicketError(f"{where}.Incoming must be true or false", ticket_id)
    role = "customer" if incoming else "agent"
    return Event(
        role,
        text=body_text(email, ("TextBody",), ("HtmlBody",), where, ticket_id),
        ts=timestamp(email.get("MessageDate") or email.get("CreatedDate"), f"{where}.MessageDate", ticket_id),
        ocr=ocr_texts(email.get("attachments"), where, ticket_id) if incoming else [],
    )


def _comment(raw: Any, where: str, ticket_id: str) -> Event:
    comment = as_dict(raw, where, ticket_id)
    published = flag(comment, "IsPublished", where, ticket_id, False)
    role = "system" if not published else ("customer" if _user_type(comment) in CUSTOMER_USER_TYPES else "agent")
    return Event(role, text=body_text(comment, ("CommentBody",), (), where, ticket_id),
                 ts=timestamp(comment.get("CreatedDate"), f"{where}.CreatedDate", ticket_id))


def _feed_item(raw: Any, where: str, ticket_id: str, have_emails: bool, have_comments: bool) -> Event | None:
    item = as_dict(raw, where, ticket_id)
    kind = item.get("Type")
    if kind is not None and not isinstance(kind, str):
        raise TicketError(f"{where}.Type must be a string", ticket_id)
    if (kind == "EmailMessageEvent" and have_emails) or (kind == "CaseCommentPost" and have_comments):
        return None  # the same message is read from its own list
    visibility = item.get("Visibility")
    if kind in _POSTS and visibility == "AllUsers":
        role = "customer" if _user_type(item) in CUSTOMER_USER_TYPES else "agent"
    else:
        role = "system"  # internal, or not said to be public, or a change notice
    rich = flag(item, "IsRichText", where, ticket_id, False)
    text = body_text(item, () if rich else ("Body",), ("Body",) if rich else (), where, ticket_id)
    return Event(role, text=text, ts=timestamp(item.get("CreatedDate"), f"{where}.CreatedDate", ticket_id))


def _already_emailed(description: str, events: list[Event]) -> bool:
    """Whether an incoming email holds the Description (email-to-case copies
    the first email's text into it)."""
    wanted = " ".join(description.split())
    return any(event.role == "customer" and wanted in " ".join(event.text.split()) for event in events)
