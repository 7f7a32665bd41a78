"""The example agent as a service speaking Cirrus's agent protocol
(docs/agent-protocol.md): ``uvicorn examples.shop_agent.service:app --port
8000``, then ``cirrus eval --agent-url http://127.0.0.1:8000/agent``.

With ``cirrus eval --tool-server`` the request names a tool server; the
service then calls its tool there itself and answers with its reply only,
as an agent that owns its tool client would."""

from __future__ import annotations

import json
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from examples.shop_agent.agent import SYSTEM_PROMPT, ShopAgent, decide, result_text

PROTOCOL = "cirrus-agent/1"


async def describe(request: Request) -> JSONResponse:
    return JSONResponse({"protocol": PROTOCOL, "name": ShopAgent.name, "version": ShopAgent.version})


async def turn(request: Request) -> JSONResponse:
    body: dict[str, Any] = await request.json()
    messages = list(body["messages"])
    step = decide(messages, body.get("tools") or [], body.get("knowledge") or [])
    where = body.get("tool_server")
    if "tool_calls" in step and where is not None:  # its own tool client, pointed at the tool server
        async with httpx.AsyncClient(timeout=30) as client:
            for number, (name, arguments) in enumerate(step["tool_calls"]):
                answer = (await client.post(f"{where['url']}/{name}", json=arguments)).json()
                content = result_text(answer["result"]) if "result" in answer else json.dumps(answer)
                messages += [{"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"s{number}", "type": "function", "function": {"name": name,
                                                                          "arguments": json.dumps(arguments)}}]},
                    {"role": "tool", "tool_call_id": f"s{number}", "content": content}]
        step = decide(messages, body.get("tools") or [], body.get("knowledge") or [])
    if "tool_calls" in step:  # Cirrus answers them from the recordings and asks again
        calls = [{"id": f"c{body['round']}-{i}", "type": "function",
                  "function": {"name": name, "arguments": json.dumps(arguments)}}
                 for i, (name, arguments) in enumerate(step["tool_calls"])]
        return JSONResponse({"message": {"role": "assistant", "content": None, "tool_calls": calls}})
    return JSONResponse({"message": {"role": "assistant", "content": step["content"]}})


app = Starlette(routes=[Route("/agent", describe, methods=["GET"]), Route("/agent", turn, methods=["POST"])])
__all__ = ["SYSTEM_PROMPT", "app"]
