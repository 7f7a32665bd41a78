"""Structured output for the judges: ``response_format`` is sent where the
endpoint takes it, dropped for good (one refused request, one warning) where
it does not, and a refusal is never mistaken for another 4xx (or the reverse).
The servers' error texts are the phrasings real servers answer with (see
``cirrus.llm.client.structured_output_refused``)."""

from __future__ import annotations

import asyncio
import json
import tomllib
import warnings
from typing import Any

import httpx
import openai
import pytest

from cirrus.evaluate.types import InfrastructureError
from cirrus.judges import schemas
from cirrus.judges.verdicts import read_coverage, read_fluency
from cirrus.llm.cache import ResponseCache
from cirrus.llm.client import ChatClient, RoleConfig, roles_from_options, structured_output_refused
from cirrus.llm.providers import Endpoint
from cirrus.settings import Settings
from tests.chat_server import ChatServer, Reply, error

KEY_ENV = "CIRRUS_TEST_LLM_KEY"
KEY = "sk-cirrus-test-secret-0123456789abcdef"
MESSAGES = [{"role": "system", "content": "judge"}, {"role": "user", "content": "is it included?"}]
VERDICT = json.dumps({"reason": "the key step is there", "verdict": "Included"})
FORMAT = schemas.COVERAGE_RESPONSE_FORMAT


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def role(server: ChatServer, **kw: Any) -> RoleConfig:
    settings = {"retry_initial_wait": 0.01, "retry_max_wait": 0.05, "timeout": 5.0, "max_retries": 3,
                "name": "judge", "temperature": 0.0, **kw}
    return RoleConfig(Endpoint("judge-model", server.base_url, KEY_ENV), **settings)


def run(coro_fn, *args, **kw):
    """``coro_fn(client)`` with a fresh ChatClient in a fresh loop; returns
    its result and the warnings raised meanwhile."""
    async def main():
        async with ChatClient(*args, **kw) as client:
            return await coro_fn(client)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = asyncio.run(main())
    return result, [w for w in caught if issubclass(w.category, RuntimeWarning)]


def ask(client: ChatClient, messages=MESSAGES, **kw):
    return client.complete_parsed(messages, read_coverage, response_format=FORMAT, **kw)


def refusing(reply: Reply, answer: str = VERDICT):
    """A server rule: ``reply`` to a request carrying response_format, else ``answer``."""
    return lambda body: reply if "response_format" in body else answer


def honouring(body: dict[str, Any]) -> str:
    return VERDICT if "response_format" in body else "Verdict: Not Included"


def vllm_error(status: int, message: str) -> Reply:
    """vLLM's error body (not OpenAI's ``{"error": {...}}``)."""
    return Reply(status=status, body={"object": "error", "message": message, "type": "BadRequestError",
                                      "param": None, "code": status})


# --- the formats


def test_the_formats_are_strict_json_schemas_of_the_prompts_answer_shape():
    # the coverage verdict also names what was missing or contradicted (docs/failures.md), before the verdict
    coverage_extra = {"missing": {"type": "string"},
                      "problem": {"type": "string", "enum": ["none", "missing", "contradiction"]}}
    for fmt, name, field, values, extra in (
            (schemas.COVERAGE_RESPONSE_FORMAT, "coverage_verdict", "verdict", ["Included", "Not Included"],
             coverage_extra),
            (schemas.FLUENCY_RESPONSE_FORMAT, "fluency_answer", "answer", ["Yes", "No"], {})):
        assert fmt["type"] == "json_schema"
        spec = fmt["json_schema"]
        assert spec["name"] == name and spec["strict"] is True
        schema = spec["schema"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert schema["required"] == ["reason", *extra, field]
        assert schema["properties"] == {"reason": {"type": "string"}, **extra,
                                        field: {"type": "string", "enum": values}}
    # what a schema-following model answers is read by the reader
    assert read_coverage(json.dumps({"reason": "r", "verdict": "Not Included"})) is False
    assert read_fluency(json.dumps({"reason": "r", "answer": "Yes"})) is True


# --- an endpoint that takes it


def test_an_endpoint_that_takes_response_format_gets_it_with_every_attempt():
    replies = iter(["hmm, let me think", VERDICT, VERDICT])
    with ChatServer(rule=lambda body: next(replies)) as server:
        async def twice(client):
            first = await ask(client, repair="Answer with the JSON object.")
            second = await ask(client)
            return first, second, client.structured

        ((ok, result), (again, _), structured), caught = run(twice, role(server))
    assert ok is True and again is True and result.content == VERDICT and structured is True
    assert len(server.requests) == 3 and not caught
    assert all(body["response_format"] == FORMAT for body in server.requests)  # the repair attempt too
    assert server.requests[1]["messages"][-1] == {"role": "user", "content": "Answer with the JSON object."}
    assert server.requests[0]["temperature"] == 0.0 and "structured_output" not in server.requests[0]


def test_a_reasoning_models_answer_is_read_from_its_content_as_before():
    with ChatServer([Reply(content=VERDICT, reasoning_content="The reply names the step.")]) as server:
        (ok, result), _ = run(ask, role(server))
    assert ok is True and result.reasoning_content == "The reply names the step."
    # content empty, only reasoning: unreadable as before (asked again, then an error), not a refusal
    with ChatServer(rule=lambda body: Reply(content="", reasoning_content="Included, I think")) as server:
        with pytest.raises(InfrastructureError, match="unreadable answer .* after 2 attempts"):
            run(lambda c: ask(c, attempts=2), role(server))
    assert len(server.requests) == 2 and all("response_format" in body for body in server.requests)


# --- endpoints that refuse it

REFUSALS = {
    # vLLM (and other pydantic servers) before json_schema: openai pydantic error list (gpustack#429 shape)
    "vllm-extra-forbidden": vllm_error(400, "[{'type': 'extra_forbidden', 'loc': ('body', 'response_format'), "
                                            "'msg': 'Extra inputs are not permitted', 'input': {'type': "
                                            "'json_schema'}}]"),
    "vllm-literal": vllm_error(400, "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
                                    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}]"),
    # llama.cpp server before json_schema (ggml-org/llama.cpp#9527, ikawrakow/ik_llama.cpp#778)
    "llama.cpp": error(400, error_message='response_format type must be one of "text" or "json_object", '
                                          "but got: json_schema"),
    # Ollama (ollama/ollama#8126)
    "ollama": error(400, error_message='invalid format: expected "json" or a JSON schema'),
    # LiteLLM proxy without drop_params (BerriAI/litellm#2275, #33738)
    "litellm": error(400, error_message="litellm.UnsupportedParamsError: openai does not support parameters: "
                                        "['response_format'], for model=judge-model. To drop these, set "
                                        "`litellm.drop_params=True`"),
    # OpenAI, a model without structured outputs (langchain-ai/langchain#31490)
    "openai": error(400, error_message="Invalid parameter: 'response_format' of type 'json_schema' is not "
                                       "supported with this model."),
    # Volcano Engine Ark / DashScope-style OpenAI-compatible APIs (agno-agi/agno#2553)
    "volcengine": error(400, error_message="The parameter `response_format.type` specified in the request are not "
                                           "valid: invalid value: `json_schema`, supported values are: "
                                           "`json_object` and `text`."),
    # TGI's axum/serde 422 (huggingface/text-generation-inference#2899 has its "missing field" twin)
    "tgi-422": error(422, error_message="Failed to deserialize the JSON body into the target type: "
                                        "response_format: unknown variant `json_schema`, expected `json` or "
                                        "`regex` at line 1 column 412"),
    # a gateway that names nothing: a 501, and a 400 about an unknown field
    "gateway-501": error(501, error_message="not implemented: this backend does not support that request option"),
    "gateway-unknown-field": Reply(status=400, body={"error": "unknown field in request body"}),
    # ik_llama.cpp / llama-cpp-python answer 500 (llama.cpp#23463): named, so not retried
    "llama-cpp-500": error(500, error_message='response_format type must be one of "text" or "json_object", '
                                              "but got: json_schema"),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_a_refusal_is_asked_again_without_it_once_and_never_tried_again(name):
    with ChatServer(rule=refusing(REFUSALS[name])) as server:
        async def twice(client):
            first = await ask(client)
            second = await ask(client, [*MESSAGES, {"role": "user", "content": "and now?"}])
            return first, second, client.structured

        ((ok, result), (again, _), structured), caught = run(twice, role(server))
    assert ok is True and again is True and result.content == VERDICT and structured is False
    # exactly one refused request (not retried, even a 5xx), its twin without the field, then none carries it
    assert len(server.requests) == 3
    assert server.requests[0]["response_format"] == FORMAT
    assert [("response_format" in body) for body in server.requests] == [True, False, False]
    assert server.requests[1] == {k: v for k, v in server.requests[0].items() if k != "response_format"}
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "judge" in message and "'judge-model'" in message and "response_format" in message
    assert "structured_output = false" in message and "[roles.judge]" in message
    assert KEY not in message


def test_concurrent_first_calls_send_one_refused_request_between_them():
    refusal = error(400, error_message="Invalid parameter: 'response_format' of type 'json_schema' is not supported",
                    delay=0.1)
    with ChatServer(rule=refusing(refusal)) as server:
        async def many(client):
            questions = [[*MESSAGES, {"role": "user", "content": f"question {i}"}] for i in range(6)]
            return await asyncio.gather(*(ask(client, q) for q in questions))

        results, caught = run(many, role(server))
    assert all(ok for ok, _ in results)
    assert sum("response_format" in body for body in server.requests) == 1 and len(server.requests) == 7
    assert len(caught) == 1


def test_structured_output_false_never_sends_it():
    with ChatServer(rule=honouring) as server:
        (ok, _), caught = run(ask, role(server, structured_output=False))
    assert ok is False  # the plain answer ("Verdict: Not Included") was read
    assert len(server.requests) == 1 and "response_format" not in server.requests[0] and not caught


def test_structured_output_true_makes_a_refusal_an_error_saying_how_to_turn_it_off():
    refusal = error(400, error_message=f"json_schema is not supported (request headers: Bearer {KEY})")
    with ChatServer(rule=refusing(refusal)) as server:
        with pytest.raises(InfrastructureError) as raised:
            run(ask, role(server, structured_output=True))
    text = str(raised.value)
    assert "HTTP 400" in text and "structured_output = false" in text and "[roles.judge]" in text
    assert "cirrus.toml" in text and "'judge-model'" in text
    assert KEY not in text and "***" in text
    assert len(server.requests) == 1  # neither retried nor sent again without it
    # a fluency checker is pointed at its own table
    with ChatServer(rule=refusing(refusal)) as server:
        with pytest.raises(InfrastructureError, match=r"\[roles\.fluency\]"):
            run(ask, role(server, structured_output=True, name="fluency"))


def test_the_warning_never_shows_the_key():
    refusal = error(400, error_message=f"unsupported field response_format; headers: Authorization: Bearer {KEY}")
    with ChatServer(rule=refusing(refusal)) as server:
        _, caught = run(ask, role(server))
    assert len(caught) == 1 and KEY not in str(caught[0].message) and "***" in str(caught[0].message)


# --- other 4xx are not refusals


@pytest.mark.parametrize("reply", [
    # vLLM's context-length 400 (vllm-project/vllm#12886)
    vllm_error(400, "This model's maximum context length is 2048 tokens. However, you requested 2723 tokens "
                    "(1699 in the messages, 1024 in the completion). Please reduce the length of the messages "
                    "or completion."),
    # OpenAI's, even if a gateway echoes the request (and with it the field's name) in its error
    error(400, error_message="This model's maximum context length is 8192 tokens; request: "
                             '{"response_format": {"type": "json_schema"}}'),
    # a "not supported" about another parameter of the request
    error(400, error_message="Unsupported parameter: 'temperature' is not supported with this model."),
    # a 5xx that does not name the field is retried as before (then an error)
    error(503, error_message="not supported right now, try later"),
], ids=["vllm-context-length", "context-length-echoing-the-body", "other-parameter", "503"])
def test_other_errors_are_not_refusals(reply):
    with ChatServer(rule=lambda body: reply) as server:
        with pytest.raises(InfrastructureError, match=f"HTTP {reply.status}"):
            run(ask, role(server, max_retries=1))
    expected = 2 if reply.status >= 500 else 1  # retried (5xx) or not (4xx); never resent without the field
    assert len(server.requests) == expected
    assert all("response_format" in body for body in server.requests)


def test_after_a_failure_that_is_not_a_refusal_the_next_call_tries_structured_output_again():
    script = [error(400, error_message="maximum context length exceeded"), VERDICT]
    with ChatServer(script) as server:
        async def two(client):
            with pytest.raises(InfrastructureError):
                await ask(client)
            return await ask(client), client.structured

        ((ok, _), structured), caught = run(two, role(server))
    assert ok is True and structured is True and not caught
    assert [("response_format" in body) for body in server.requests] == [True, True]


def _status_error(status: int, message: str, body: Any = None) -> openai.APIStatusError:
    response = httpx.Response(status, request=httpx.Request("POST", "http://127.0.0.1/v1/chat/completions"))
    return openai.APIStatusError(message, response=response, body=body)


def test_the_refusal_rules():
    assert structured_output_refused(_status_error(400, "Error code: 400 - response_format is not supported"))
    assert structured_output_refused(_status_error(404, "Error code: 404", {"detail": "json_schema unsupported"}))
    assert structured_output_refused(_status_error(400, "Error code: 400 - unknown field"), ["temperature"])
    # a bare "not supported" naming another field of the request is about that field
    assert not structured_output_refused(_status_error(400, "Error code: 400 - 'max_completion_tokens' is not "
                                                            "supported"), ["max_completion_tokens"])
    assert not structured_output_refused(_status_error(400, "Error code: 400 - enable_thinking: extra fields not "
                                                            "permitted"), ["enable_thinking"])
    assert not structured_output_refused(_status_error(400, "Error code: 400 - prompt is too long"))
    assert not structured_output_refused(_status_error(500, "Error code: 500 - not supported"))  # unnamed 5xx
    assert not structured_output_refused(_status_error(429, "Error code: 429 - response_format quota"))
    assert not structured_output_refused(ValueError("response_format not supported"))


# --- the cache


def test_the_cache_key_leaves_response_format_out(tmp_path):
    cache = ResponseCache(tmp_path / "cache")
    refusal = error(400, error_message='response_format type must be one of "text" or "json_object"')
    behaviour = {"rule": honouring}  # one server (the base URL is part of the key), two behaviours
    with ChatServer(rule=lambda body: behaviour["rule"](body)) as server:
        # an answer cached before structured output existed (or with it off) is found by a structured call
        (old, _), _ = run(lambda c: c.complete_parsed(MESSAGES, read_coverage), role(server), cache=cache)
        assert old is False and len(server.requests) == 1
        (ok, cached), _ = run(ask, role(server), cache=cache)
        assert ok is False and cached.cached and len(server.requests) == 1

        # an answer cached after a fallback is stored under the key of the body without the field ...
        question = [*MESSAGES, {"role": "user", "content": "another one"}]
        behaviour["rule"] = refusing(refusal)

        async def fallback_then_key(client):
            value = await ask(client, question)
            return value, client.cache_key(client.request_body(question))

        ((ok, fresh), key), _ = run(fallback_then_key, role(server), cache=cache)
        assert ok is True and not fresh.cached and len(server.requests) == 3
        assert cache.get(key) is not None
        # ... which a client that sends it, one that never does and one that must all find
        behaviour["rule"] = honouring
        for settings in ({}, {"structured_output": False}, {"structured_output": True}):
            (ok, hit), caught = run(lambda c: ask(c, question), role(server, **settings), cache=cache)
            assert ok is True and hit.cached and not caught
        assert len(server.requests) == 3
    cache.close()


# --- configuration


def test_structured_output_is_a_role_setting_outside_the_fingerprint_and_the_body():
    endpoint = Endpoint("judge-model", "http://127.0.0.1:9/v1", KEY_ENV)
    default = RoleConfig(endpoint, temperature=0.0)
    assert default.structured_output is None
    for value in (False, True):
        other = RoleConfig(endpoint, temperature=0.0, structured_output=value)
        assert other.fingerprint() == default.fingerprint()
        assert "structured_output" not in other.body_params()
    with pytest.raises(ValueError, match="structured_output"):
        RoleConfig(endpoint, structured_output="no")  # type: ignore[arg-type]

    # cirrus.toml's [roles.judge] reaches the role as other per-role keys do
    settings = Settings.model_validate(tomllib.loads("[roles.judge]\nrpm = 60\nstructured_output = false\n"))
    params = settings.role("judge").params()
    assert params == {"rpm": 60.0, "structured_output": False}
    assert settings.role("fluency").params() == {}
    _, judge, fluency = roles_from_options("agent-model", "http://127.0.0.1:9/v1", KEY_ENV, judge_params=params)
    assert judge.structured_output is False and fluency.structured_output is None
    assert judge.fingerprint() == RoleConfig.from_options("agent-model", "http://127.0.0.1:9/v1", KEY_ENV,
                                                          temperature=0.0).fingerprint()
