"""The exact bytes ChatClient sends (request line, headers, body) are pinned by
a fixture recorded from the client before the CPU work of issue 28: a change
to how requests are built, encoded or sent must leave them identical, and the
answers read from the same response bytes must be the same ChatResults.

Only what differs between machines and runs is normalized: the port in the
Host header and the SDK's platform headers (x-stainless-os, -arch,
-runtime-version, -package-version), which name this machine's Python and
OS.  To record the fixture again (only when a wire change is intended):
``CIRRUS_RECORD_WIRE=1 .venv/bin/python -m pytest -n 0 -q tests/test_wire_bytes.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from cirrus.llm.cache import ResponseCache
from cirrus.llm.client import ChatClient, ClientPool, RoleConfig
from cirrus.llm.providers import Endpoint

FIXTURE = Path(__file__).parent / "data" / "wire_bytes.json"
KEY_ENV = "CIRRUS_TEST_WIRE_KEY"
KEY = "sk-cirrus-wire-test-0123456789abcdef"
PLATFORM_HEADERS = ("x-stainless-os", "x-stainless-arch", "x-stainless-runtime-version",
                    "x-stainless-package-version", "user-agent")

TOOLS = [{"type": "function", "function": {
    "name": "get_reservation_details", "description": "Look up a reservation – by its id (ünïcode)",
    "parameters": {"type": "object", "properties": {"reservation_id": {"type": "string"}},
                   "required": ["reservation_id"]}}}]
MESSAGES = [
    {"role": "system", "content": "You are an airline agent. Answer briefly; \"quote\" and\nnewline, 中文."},
    {"role": "user", "content": "Where is my booking ZFA04Y?"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_0", "type": "function", "function": {
        "name": "get_reservation_details", "arguments": "{\"reservation_id\": \"ZFA04Y\"}"}}]},
    {"role": "tool", "tool_call_id": "call_0", "content": "{\"status\": \"confirmed\", \"price\": 1.5e2}"},
    {"role": "user", "content": "And the seat?"},
]
# the answers, in order: a tool call, a text with usage details, a JSON verdict, the same verdict
ANSWERS = [
    {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "model-x", "choices": [
        {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_9", "type": "function", "function": {
                "name": "get_reservation_details", "arguments": "{\"reservation_id\":\"ZFA04Y\"}"}}]}}],
     "usage": {"prompt_tokens": 120, "completion_tokens": 9, "total_tokens": 129}},
    {"id": "chatcmpl-2", "object": "chat.completion", "created": 0, "model": "model-x", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Seat 12A – ok.",
                                                          "reasoning_content": "looked it up"}}],
     "usage": {"prompt_tokens": 130, "completion_tokens": 7, "total_tokens": 137,
               "prompt_tokens_details": {"cached_tokens": 64}, "completion_tokens_details": {"reasoning_tokens": 3}}},
    {"id": "chatcmpl-3", "object": "chat.completion", "created": 0, "model": "judge-x", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
                                                          "content": "{\"verdict\": \"Included\"}"}}],
     "usage": {"prompt_tokens": 50, "completion_tokens": 6, "total_tokens": 56}},
]


class RawServer:
    """Records every request's raw bytes; answers ``ANSWERS`` in turn (the last one again when used up)."""

    def __init__(self) -> None:
        self.raw: list[bytes] = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buffer = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buffer:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                head, _, rest = buffer.partition(b"\r\n\r\n")
                length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
                while len(rest) < length:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    rest += chunk
                self.raw.append(head + b"\r\n\r\n" + rest[:length])
                buffer = rest[length:]
                answer = json.dumps(ANSWERS[min(len(self.raw), len(ANSWERS)) - 1]).encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(answer)).encode() + b"\r\n\r\n" + answer)

    def close(self) -> None:
        self._sock.close()


def normalized(raw: bytes, port: int) -> dict[str, Any]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        value = value.strip()
        if name.lower() in PLATFORM_HEADERS:
            value = "<platform>"
        elif name.lower() == "host":
            value = value.replace(str(port), "<port>")
        headers.append([name, value])
    return {"request_line": lines[0], "headers": headers, "body": body.decode("utf-8")}


async def _exchange(base_url: str, cache_dir: Path) -> tuple[list[dict[str, Any]], list[Any]]:
    agent = RoleConfig(Endpoint("model-x", base_url, KEY_ENV), temperature=0.3, max_tokens=99,
                       extra_body={"top_p": 0.5}, timeout=10.0, max_retries=0)
    judge = RoleConfig(Endpoint("judge-x", base_url, KEY_ENV), temperature=0.0, timeout=10.0, max_retries=0,
                       structured_output=True)
    results: list[Any] = []
    with ResponseCache(cache_dir) as cache:
        async with ClientPool(cache) as pool:
            a, j = pool.client(agent), pool.client(judge)
            results.append(await a.complete(MESSAGES, tools=TOOLS, tool_choice="auto"))
            results.append(await a.complete(MESSAGES[:2], tools=TOOLS, parallel_tool_calls=False))
            fmt = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": {
                "type": "object", "properties": {"verdict": {"type": "string"}}}}}
            value, result = await j.complete_parsed(MESSAGES[:2], lambda text: json.loads(text)["verdict"],
                                                    response_format=fmt)
            results.append([value, result])
            results.append(await j.complete([{"role": "user", "content": "judge: é"}], cache=True))
            # the same question again: answered from the cache, nothing sent
            results.append(await j.complete([{"role": "user", "content": "judge: é"}], cache=True))
        async with ChatClient(agent) as own:  # a client with its own AsyncOpenAI
            results.append(await own.complete([{"role": "user", "content": "hi"}]))
    shown = []
    for r in results:
        items = r if isinstance(r, list) else [r]
        row = []
        for item in items:
            if hasattr(item, "latency_s"):
                item = {k: v for k, v in asdict(item).items() if k != "latency_s"}
            row.append(item)
        shown.append(row)
    return shown, results


def _names_folded(request: dict[str, Any]) -> dict[str, Any]:
    return {**request, "headers": [[name.lower(), value] for name, value in request["headers"]]}


@pytest.mark.parametrize("transport", ["httpx", "aiohttp"])
def test_request_bytes_and_answers_match_the_recorded_fixture(monkeypatch, tmp_path, transport):
    """The fixture was recorded with the SDK's httpx transport before Cirrus
    read answers as dicts; both transports send its request line, its headers
    in its order with its values, and its body byte for byte.  aiohttp writes
    the three headers it adds itself (host, accept-encoding, connection) in
    lower case: header names are case-insensitive (RFC 9110), so names are
    compared case-folded for it, exactly for httpx."""
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("CIRRUS_HTTP_TRANSPORT", transport)
    server = RawServer()
    try:
        shown, _ = asyncio.run(_exchange(f"http://127.0.0.1:{server.port}/v1", tmp_path / "cache"))
    finally:
        server.close()
    recorded = {"requests": [normalized(raw, server.port) for raw in server.raw], "results": shown}
    recorded = json.loads(json.dumps(recorded, ensure_ascii=False))
    if os.environ.get("CIRRUS_RECORD_WIRE") == "1" and transport == "httpx":
        FIXTURE.write_text(json.dumps(recorded, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        pytest.skip("recorded the fixture")
    expected = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert len(recorded["requests"]) == len(expected["requests"]) == 5
    for got, want in zip(recorded["requests"], expected["requests"]):
        if transport == "httpx":
            assert got == want
        else:
            assert got["body"] == want["body"] and got["request_line"] == want["request_line"]
            assert _names_folded(got) == _names_folded(want)
    assert recorded["results"] == expected["results"]


@pytest.mark.parametrize("answer", [
    *ANSWERS,
    {"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"text": "b"}]}}]},  # content parts
    {"choices": [{"message": {"tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}, {"type": "custom"}]},
                  "finish_reason": 3}], "model": 7, "usage": {"prompt_tokens": 1.0, "completion_tokens": True}},
    {"choices": [{"message": {"content": "x", "reasoning": "r"}}], "usage": 5},
])
def test_an_answer_read_as_a_dict_gives_the_result_of_the_sdk_model(answer):
    from openai._models import construct_type
    from openai.types.chat import ChatCompletion

    from cirrus.llm.client.results import ChatResult

    as_model = ChatResult.from_completion(construct_type(type_=ChatCompletion, value=answer), 0.5, 2)
    assert ChatResult.from_completion(json.loads(json.dumps(answer)), 0.5, 2) == as_model


@pytest.mark.parametrize("answer", [{"choices": []}, {"choices": None}, {"choices": [{"message": "x"}]}, {}])
def test_a_malformed_answer_read_as_a_dict_fails_as_the_sdk_model_did(answer):
    from openai._models import construct_type
    from openai.types.chat import ChatCompletion

    from cirrus.llm.client.errors import _MalformedAnswer
    from cirrus.llm.client.results import ChatResult

    messages = []
    for completion in (construct_type(type_=ChatCompletion, value=answer), dict(answer)):
        with pytest.raises(_MalformedAnswer) as caught:
            ChatResult.from_completion(completion, 0.0, 1)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
