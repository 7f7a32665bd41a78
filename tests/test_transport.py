"""Both HTTP transports (cirrus.llm.client.transport) report a broken
endpoint the same way: a refused connection, a server that hangs up without
answering, a body cut short, a server too slow for the timeout, an HTTP error
and a good answer read alike; the SDK's aiohttp transport alone would call
every connection error a timeout."""

from __future__ import annotations

import asyncio
import socket

import pytest

from cirrus.evaluate.types import InfrastructureError
from cirrus.llm.client import ChatClient, ModelAuthError
from cirrus.llm.client.retry import connection_refused
from cirrus.llm.client.transport import TRANSPORT_ENV, http_transport
from cirrus.llm.providers import Endpoint
from tests.chat_server import ChatServer, Reply, error, text
from tests.test_endpoint_faults import MALFORMED_BODIES
from tests.test_llm_client import KEY_ENV, _key, role  # noqa: F401  (_key: the autouse fixture setting the key)

MESSAGES = [{"role": "user", "content": "hello"}]
TRANSPORTS = ("httpx", "aiohttp")


def _outcome(r, transport: str, monkeypatch, *, warm: bool = False) -> tuple[str, str, BaseException | None]:
    """How a call ends; ``warm``: after a first good call on the same client
    (the aiohttp path sends every call after the first without the SDK)."""
    monkeypatch.setenv(TRANSPORT_ENV, transport)

    async def main():
        async with ChatClient(r) as client:
            if warm:
                assert (await client.complete(MESSAGES)).content == "warm"
            return await client.complete(MESSAGES)
    try:
        result = asyncio.run(main())
    except (InfrastructureError, ModelAuthError) as exc:
        return type(exc).__name__, str(exc).replace(str(r.endpoint.base_url), "<url>"), exc.__cause__
    return "ok", result.content or "", None


def _category(said: str) -> str:
    """What kind of failure the error text names (the libraries word the
    detail after it differently)."""
    for category in ("timed out", "connection failed", "HTTP 400", "HTTP 401", "malformed answer"):
        if category in said:
            return category
    return said


FAULTS = {
    "answer": [text("fine")],
    "http 400": [error(400)],
    "hangs up": [Reply(hang=0.05)],
    "body cut short": [Reply(content="x" * 200, truncate=30)],
    "too slow": [Reply(content="late", delay=3.0)],
    "key refused": [error(401)],
    "rate limited, then fine": [error(429, retry_after=0.05), text("fine")],
    "server error, then fine": [error(503), text("fine")],
    "gzip answer": [text("fine", headers={"Content-Encoding": "identity"})],
    **{f"malformed: {name}": [Reply(body=body), text("fine")] for name, body in MALFORMED_BODIES.items()},
}


@pytest.mark.parametrize("warm", [False, True], ids=["first call", "later call"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_fault_reads_the_same_on_both_transports(fault, warm, monkeypatch):
    expected = {"http 400": "HTTP 400", "too slow": "timed out", "key refused": "HTTP 401",
                "hangs up": "connection failed", "body cut short": "connection failed"}
    seen = {}
    for transport in TRANSPORTS:
        with ChatServer([*([text("warm")] if warm else []), *FAULTS[fault]]) as server:
            r = role(server, max_retries=0 if fault in expected else 1, timeout=1.0)
            kind, said, _ = _outcome(r, transport, monkeypatch, warm=warm)
        seen[transport] = (kind, _category(said))
    assert seen["aiohttp"] == seen["httpx"]
    if fault in expected:
        assert seen["httpx"][0] != "ok" and seen["httpx"][1] == expected[fault]
    else:  # answered at once, or after a retry of a malformed or refused answer
        assert seen["httpx"] == ("ok", "fine")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_refused_connection_is_refused_not_a_timeout(transport, monkeypatch):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    from cirrus.llm.client import RoleConfig

    r = RoleConfig(Endpoint("model-x", f"http://127.0.0.1:{port}/v1", KEY_ENV), max_retries=0, timeout=2.0)
    kind, said, cause = _outcome(r, transport, monkeypatch)
    assert kind == "InfrastructureError" and connection_refused(cause)
    assert "nothing listens" in said and "timed out" not in said


def test_the_transport_setting(monkeypatch):
    monkeypatch.delenv(TRANSPORT_ENV, raising=False)
    assert http_transport() == "aiohttp"
    monkeypatch.setenv(TRANSPORT_ENV, " HTTPX ")
    assert http_transport() == "httpx"
    monkeypatch.setenv(TRANSPORT_ENV, "curl")
    with pytest.raises(ValueError, match="aiohttp, httpx"):
        http_transport()
