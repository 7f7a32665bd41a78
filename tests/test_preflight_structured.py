"""The endpoint check also asks whether the judge's and the fluency
checker's endpoints take structured output (cirrus.evaluate.preflight): the
run's first judge calls then go out together instead of waiting, one
structured request at a time, for the first to be answered."""

from __future__ import annotations

import asyncio
import warnings

import pytest

from cirrus.evaluate.preflight import PreflightError, check_endpoints
from cirrus.judges import schemas
from cirrus.llm.client import ChatClient, RoleConfig
from cirrus.llm.providers import Endpoint
from tests.chat_server import ChatServer, Reply

REFUSAL = Reply(status=400, error_message="'response_format' of type 'json_schema' is not supported with this model")


def _clients(server: ChatServer, **judge_kw) -> dict[str, ChatClient]:
    def client(name: str, model: str, **kw) -> ChatClient:
        return ChatClient(RoleConfig(Endpoint(model, server.base_url, None), name=name, retry_initial_wait=0.01,
                                     retry_max_wait=0.02, **kw))
    return {"agent": client("agent", "agent-m"), "judge": client("judge", "judge-m", **judge_kw),
            "fluency": client("fluency", "fluency-m")}


def _check(clients: dict[str, ChatClient]) -> tuple[list[str], list[str]]:
    """(check_endpoints' warnings, the RuntimeWarnings raised meanwhile)."""
    async def main() -> list[str]:
        try:
            return await check_endpoints(clients)
        finally:
            for client in clients.values():
                await client.aclose()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        said = asyncio.run(main())
    return said, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def _format_of(body: dict) -> object:
    return body.get("response_format", {}).get("json_schema", {}).get("name") if "response_format" in body else None


def test_an_endpoint_that_takes_it_is_asked_with_the_roles_own_format():
    with ChatServer(rule=lambda body: "OK") as server:
        clients = _clients(server)
        said, warned = _check(clients)
        sent = {body["model"]: _format_of(body) for body in server.requests}
    assert said == [] and warned == []
    assert sent == {"agent-m": None, "judge-m": schemas.COVERAGE_RESPONSE_FORMAT["json_schema"]["name"],
                    "fluency-m": schemas.FLUENCY_RESPONSE_FORMAT["json_schema"]["name"]}
    assert clients["judge"].structured is True and clients["fluency"].structured is True
    assert clients["agent"].structured is None  # the agent never sends one


def test_a_refusal_teaches_the_clients_and_the_check_still_passes():
    def rule(body: dict):
        return REFUSAL if "response_format" in body else "OK"

    with ChatServer(rule=rule) as server:
        clients = _clients(server)
        said, warned = _check(clients)
        judge_bodies = [body for body in server.requests if body["model"] == "judge-m"]
    assert said == []
    assert [("response_format" in body) for body in judge_bodies] == [True, False]  # asked again without it
    assert clients["judge"].structured is False and clients["fluency"].structured is False
    assert any("does not take structured output" in text and "[roles.judge]" in text for text in warned)


def test_another_400_to_the_format_is_asked_again_without_it_and_learns_nothing():
    def rule(body: dict):
        return Reply(status=400, error_message="schema too deep") if "response_format" in body else "OK"

    with ChatServer(rule=rule) as server:
        clients = _clients(server)
        said, warned = _check(clients)
    assert said == [] and warned == []
    assert clients["judge"].structured is None  # the run's first judge call finds out, as before


def test_a_missing_model_is_still_an_error_after_one_probe():
    def rule(body: dict):
        return Reply(status=404, error_message="The model `judge-m` does not exist") if body["model"] == "judge-m" \
            else "OK"

    with ChatServer(rule=rule) as server:
        with pytest.raises(PreflightError, match="judge-m"):
            _check(_clients(server))
        asked = [body for body in server.requests if body["model"] == "judge-m"]
    assert len(asked) == 1


@pytest.mark.parametrize("setting", [False, True])
def test_a_role_that_sets_structured_output_is_not_asked(setting):
    with ChatServer(rule=lambda body: "OK") as server:
        clients = _clients(server, structured_output=setting)
        _check(clients)
        judge = [body for body in server.requests if body["model"] == "judge-m"]
    assert ["response_format" in body for body in judge] == [False]
    assert clients["judge"].structured is None
