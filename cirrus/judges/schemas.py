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
commits to a verdict, as the prompts ask.
"""

from __future__ import annotations

from typing import Any


def _verdict_format(name: str, field: str, values: tuple[str, ...]) -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {
            "name": name,
            "strict": True,
            "schema": {
                "type": "object",
                "properties": {
                    "reason": {"type": "string"},
                    field: {"type": "string", "enum": list(values)},
                },
                "required": ["reason", field],
                "additionalProperties": False,
            },
        },
    }


COVERAGE_RESPONSE_FORMAT: dict[str, Any] = _verdict_format("coverage_verdict", "verdict", ("Included", "Not Included"))
FLUENCY_RESPONSE_FORMAT: dict[str, Any] = _verdict_format("fluency_answer", "answer", ("Yes", "No"))
