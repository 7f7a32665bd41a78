"""The structured-output formats the LLM judges ask for.

Each constant is an OpenAI ``response_format`` (a strict JSON schema) given to
:meth:`cirrus.llm.client.ChatClient.complete_parsed`.  Why:

* Endpoints that support structured output (OpenAI, vLLM, llama.cpp server,
  recent Ollama, ...) then answer with exactly the object the prompt already
  asks for -- ``{"reason": ..., "verdict": "Included" | "Not Included"}`` or
  ``{"reason": ..., "answer": "Yes" | "No"}`` -- so fewer answers are
  unreadable and asked again.
* The reader (:mod:`cirrus.judges.verdicts`) still reads every shape, so an
  endpoint that ignores the format, a cached answer from before, or a reasoning
  model that wraps its JSON in prose is judged exactly as before.
* An endpoint that refuses the field (an HTTP 400/422 naming
  ``response_format``, ``json_schema``, "not supported", ...) is asked again
  at once without it, and the client stops sending it for the rest of its life
  (one warning); ``structured_output = false`` under ``[roles.judge]`` (or
  ``[roles.fluency]``) in cirrus.toml never sends it.  See
  :class:`cirrus.llm.client.ChatClient`.

``reason`` comes first so that a model generating in order reasons before it
commits to a verdict, as the prompts ask.  The coverage format also has
``missing`` (what key information is absent or contradicted; empty when
Included) and ``problem`` (``none`` / ``missing`` / ``contradiction``) between
them, which name the failure category of a rejected turn (docs/failures.md);
the reader treats both as optional, so answers without them read as before.
"""

from __future__ import annotations

from typing import Any


PROBLEM_VALUES = ("none", "missing", "contradiction")


def _verdict_format(name: str, field: str, values: tuple[str, ...],
                    middle: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A strict schema: ``reason`` first, the ``middle`` fields, the verdict
    ``field`` last (strict mode needs every property required)."""
    properties = {"reason": {"type": "string"}, **(middle or {}), field: {"type": "string", "enum": list(values)}}
    return {
        "type": "json_schema",
        "json_schema": {
            "name": name,
            "strict": True,
            "schema": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
                "additionalProperties": False,
            },
        },
    }


COVERAGE_RESPONSE_FORMAT: dict[str, Any] = _verdict_format(
    "coverage_verdict", "verdict", ("Included", "Not Included"),
    {"missing": {"type": "string"}, "problem": {"type": "string", "enum": list(PROBLEM_VALUES)}})
FLUENCY_RESPONSE_FORMAT: dict[str, Any] = _verdict_format("fluency_answer", "answer", ("Yes", "No"))
