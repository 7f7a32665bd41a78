"""Where a model name is served: a small registry of OpenAI-compatible
providers, used when no ``--base-url`` is given."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Provider:
    name: str
    base_url: str
    api_key_env: str
    prefixes: tuple[str, ...]


PROVIDERS: tuple[Provider, ...] = (
    Provider("dashscope", "https://dashscope.aliyuncs.com/compatible-mode/v1", "DASHSCOPE_API_KEY", ("qwen", "qwq")),
    Provider("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", ("gpt-", "o1", "o3", "o4", "chatgpt")),
    Provider("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", ("deepseek",)),
)


class EndpointError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A model at a base URL, with the name of the variable holding its key.
    The key itself is read from the environment only when a client is made
    and is never stored in configs, logs or results."""

    model: str
    base_url: str
    api_key_env: str | None

    def api_key(self) -> str:
        if not self.api_key_env:
            return "not-needed"  # local servers (vLLM, Ollama) accept any key
        key = os.environ.get(self.api_key_env)
        if not key:
            raise EndpointError(
                f"model {self.model!r} at {self.base_url} needs an API key: set the environment "
                f"variable {self.api_key_env} (or choose another with --api-key-env)"
            )
        return key


def resolve_endpoint(model: str, base_url: str | None = None, api_key_env: str | None = None) -> Endpoint:
    if base_url:
        return Endpoint(model, base_url.rstrip("/"), api_key_env)
    lowered = model.lower()
    for provider in PROVIDERS:
        if lowered.startswith(provider.prefixes):
            return Endpoint(model, provider.base_url, api_key_env or provider.api_key_env)
    known = ", ".join(f"{p.name} ({'/'.join(p.prefixes)}*)" for p in PROVIDERS)
    raise EndpointError(f"don't know where model {model!r} is served: pass --base-url (known providers: {known})")
