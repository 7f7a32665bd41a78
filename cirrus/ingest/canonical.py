"""Turn a ticket's events into a strictly alternating dialogue.

* consecutive customer messages, with the OCR text of their image
  attachments, become one customer turn;
* consecutive agent messages become one agent turn, and the tool calls (with
  their results) made before or between them belong to that turn;
* tool calls after the agent's last message form a turn of their own;
* system events that survived denoising are dropped here: the agent under test
  never sees them as dialogue.
"""

from __future__ import annotations

from cirrus.schema import AgentTurn, CustomerTurn, Ticket, ToolExchange, Turn


def _customer_text(text: str, ocr: list[str]) -> str:
    parts = [text.strip()] if text.strip() else []
    parts += [f"[image text] {o.strip()}" for o in ocr if o.strip()]
    return "\n".join(parts)


def canonicalize(ticket: Ticket) -> list[Turn]:
    turns: list[Turn] = []
    calls: dict[str, ToolExchange] = {}

    def agent_turn() -> AgentTurn:
        if not turns or not isinstance(turns[-1], AgentTurn):
            turns.append(AgentTurn())
        return turns[-1]  # type: ignore[return-value]

    for event in ticket.events:
        if event.role == "customer":
            text = _customer_text(event.text, event.ocr)
            if not text:
                continue
            if turns and isinstance(turns[-1], CustomerTurn):
                turns[-1].text += "\n" + text
            else:
                turns.append(CustomerTurn(text))
        elif event.role == "agent":
            if event.text.strip():
                agent_turn().texts.append(event.text.strip())
        elif event.role == "tool_call":
            exchange = ToolExchange(event.call_id or f"call-{len(calls) + 1}", event.name or "_", event.arguments)
            if event.call_id:
                calls[event.call_id] = exchange
            agent_turn().tool_calls.append(exchange)
        elif event.role == "tool_result" and event.call_id in calls:
            calls[event.call_id].results.append(event.content)
    return turns
