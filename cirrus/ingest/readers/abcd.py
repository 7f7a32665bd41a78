"""Action-Based Conversations Dataset (ABCD) conversations.

``original`` holds ``[speaker, text]`` turns (``agent``, ``customer``,
``action``); ``delexed`` holds the same turns, index for index, with
``targets = [subflow, kind, action, values, ...]``.  Each action turn becomes
a tool call (name = the action, e.g. ``pull-up-account``; arguments = its
slot values) answered by a tool result holding the action's original text.

Argument names come from :data:`ACTION_ARGS`, written after ABCD's
``ontology.json`` (not needed at run time).  Where the ontology lists several
alternative slots of which the record holds one value (``enter-details``
takes a username *or* an email *or* ...), the action gets one neutral
argument name instead of guessing which slot was filled.  Values are named
only when their count matches the action's arguments; otherwise, and for
unknown actions, the arguments are ``{"values": [...]}``.
"""

from __future__ import annotations

from typing import Any

from cirrus.ingest.readers._common import as_dict, as_list, id_str, role_name, show
from cirrus.schema import Event, SourceRef, Ticket, TicketError, openai_function_name

NAME = "abcd"

ACTION_ARGS: dict[str, tuple[str, ...]] = {
    # kb_query
    "verify-identity": ("customer_name", "account_id", "order_id", "zip_code"),
    "validate-purchase": ("username", "email", "order_id"),
    "ask-the-oracle": (),
    "make-password": (),
    "promo-code": (),
    "subscription-status": (),
    # interaction
    "pull-up-account": ("name_or_account_id",),
    "offer-refund": ("amount",),
    "make-purchase": ("product",),
    "record-reason": ("reason",),
    "enter-details": ("details",),
    "shipping-status": ("shipping_option",),
    "update-order": ("change",),
    "update-account": ("change",),
    "send-link": (),
    "notify-team": ("company_team",),
    # faq_policy
    "membership": ("membership_level",),
    "select-faq": ("faq_answer",),
    "search-faq": (),
    "try-again": (),
    "log-out-in": (),
    "instructions": (),
    "search-jeans": (),
    "search-shirt": (),
    "search-boots": (),
    "search-jacket": (),
    "search-pricing": (),
    "search-timing": (),
    "search-membership": (),
    "search-policy": (),
}

_ROLES = {"agent": "agent", "customer": "customer"}


def detect(payload: Any) -> bool:
    return (
        isinstance(payload, dict)
        and "convo_id" in payload
        and "original" in payload
        and not ({"events", "messages", "traj"} & payload.keys())
    )


def arguments_for(action: str, values: list[Any]) -> dict[str, Any]:
    names = ACTION_ARGS.get(action)
    if names is not None and len(names) == len(values):
        return dict(zip(names, values))
    return {"values": list(values)}


def parse(payload: Any, origin: SourceRef) -> Ticket:
    convo = as_dict(payload, "conversation", None)
    if convo.get("convo_id") is None:
        raise TicketError("missing convo_id")
    ticket_id = f"abcd-{id_str(convo['convo_id'], 'convo_id')}"
    original = as_list(convo.get("original"), "original", ticket_id)
    if not original:
        raise TicketError("original is empty", ticket_id)
    delexed = as_list(convo.get("delexed", []), "delexed", ticket_id)
    scenario = convo.get("scenario")
    flow = scenario.get("flow") if isinstance(scenario, dict) else None

    events: list[Event] = []
    actions = 0
    for i, turn in enumerate(original):
        where = f"original[{i}]"
        if not (isinstance(turn, list) and len(turn) == 2 and all(isinstance(x, str) for x in turn)):
            raise TicketError(f"{where} is not a [speaker, text] pair", ticket_id)
        raw_speaker, text = turn
        speaker = role_name(raw_speaker)  # case and surrounding whitespace ignored, like roles
        if speaker in _ROLES:
            events.append(Event(_ROLES[speaker], text=text))
        elif speaker == "action":
            action, values = _action(delexed, i, ticket_id)
            actions += 1
            call_id = f"action-{actions}"
            name = openai_function_name(action)
            events.append(Event("tool_call", call_id=call_id, name=name, arguments=arguments_for(action, values)))
            events.append(Event("tool_result", call_id=call_id, content=text))
        else:
            raise TicketError(f"{where}: unknown speaker {show(raw_speaker)}", ticket_id)
    return Ticket(
        ticket_id=ticket_id,
        events=events,
        origin=origin,
        category=flow if isinstance(flow, str) else None,
        status="resolved",
    )


def _action(delexed: list[Any], i: int, ticket_id: str) -> tuple[str, list[Any]]:
    """The action name and slot values recorded for action turn ``i``."""
    turn = delexed[i] if i < len(delexed) else None
    targets = turn.get("targets") if isinstance(turn, dict) and turn.get("speaker") == "action" else None
    if not (isinstance(targets, list) and len(targets) >= 4):
        raise TicketError(f"original[{i}]: action turn has no matching delexed turn with targets", ticket_id)
    action, values = targets[2], targets[3]
    if not isinstance(action, str) or not action or not isinstance(values, list):
        raise TicketError(f"delexed[{i}]: targets need an action name and a list of values", ticket_id)
    return action, values
