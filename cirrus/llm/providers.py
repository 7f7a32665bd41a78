"""Where a model name is served: a small registry of OpenAI-compatible
providers, used when no ``--base-url`` is given."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Provider:
    name: str
    base_url: str
    api_key_env: str
    prefixes: tuple[str, ...]


BUILTIN_PROVIDERS: tuple[Provider, ...] = (
    Provider("dashscope", "https://dashscope.aliyuncs.com/compatible-mode/v1", "DASHSCOPE_API_KEY", ("qwen", "qwq")),
    Provider("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", ("gpt-", "o1", "o3", "o4", "chatgpt")),
    Provider("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", ("deepseek",)),
    # local servers: "ollama/llama3.1:8b", "vllm/Qwen/Qwen3-8B" (the prefix is not sent)
    Provider("ollama", "http://127.0.0.1:11434/v1", "", ("ollama/",)),
    Provider("vllm", "http://127.0.0.1:8000/v1", "", ("vllm/",)),
)
# providers from cirrus.toml come first, so a project can override the built-ins
_extra_providers: list[Provider] = []


def register_providers(providers: list[Provider]) -> None:
    """Add providers (from ``cirrus.toml``) in front of the built-in ones."""
    _extra_providers[:0] = providers


def providers() -> tuple[Provider, ...]:
    return (*_extra_providers, *BUILTIN_PROVIDERS)


class EndpointError(RuntimeError):
    pass


class ModelAuthError(EndpointError):
    """The endpoint refused the API key (HTTP 401/403).  Not retried, and not
    an infrastructure error of one call: every other call would fail the same
    way, so a run (eval or ingest) stops."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A model at a base URL, with the name of the variable holding its key.
    The key itself is read from the environment only when a client is made
    and is never stored in configs, logs or results.  ``option_prefix``
    names the command-line options that choose them, for messages
    (:func:`option`); it is no part of the endpoint's identity."""

    model: str
    base_url: str
    api_key_env: str | None
    option_prefix: str = field(default="", compare=False)

    def key_refused(self, status: int, role: str = "", option: str = "--api-key-env") -> ModelAuthError:
        """The error for a 401/403 from this endpoint, naming the key's
        variable and the command-line ``option`` that chooses it."""
        if self.api_key_env:
            advice = (f"check the API key in the environment variable {self.api_key_env} "
                      f"(or choose another variable with {option})")
        else:
            advice = f"the endpoint needs an API key: name its environment variable with {option}"
        who = f"{role} model" if role else "model"
        return ModelAuthError(f"{who} {self.model!r} at {shown_url(self.base_url)} refused the request "
                              f"(HTTP {status}, not retried): {advice}")

    def api_key(self) -> str:
        if not self.api_key_env:
            return "not-needed"  # local servers (vLLM, Ollama) accept any key
        key = os.environ.get(self.api_key_env)
        if not key:
            raise EndpointError(
                f"model {self.model!r} at {shown_url(self.base_url)} needs an API key: set the environment "
                f"variable {self.api_key_env} (or choose another with {option(self.option_prefix, 'api-key-env')})"
            )
        return key


def option(prefix: str, name: str) -> str:
    """The command-line option ``name`` of a role whose options carry
    ``prefix``: ``--judge-base-url`` for ("judge", "base-url"),
    ``--base-url`` for ("", "base-url")."""
    return f"--{prefix}-{name}" if prefix else f"--{name}"


# query parameters whose values are shown: they never carry a credential
_SHOWN_QUERY_PARAMETERS = frozenset({"api-version", "api_version"})


def shown_url(url: str | None) -> str | None:
    """``url`` fit to print or store: a user name and password written into it
    (``https://user:secret@host/v1``) become ``***``, and so does every query
    value (``?api-key=...``, ``?token=...``; gateways take keys there) but
    ``api-version``'s; a fragment is dropped."""
    if not url:
        return url
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" in parts.netloc:
        parts = parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1])
    if parts.query:
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        shown = [(name, value if name.lower() in _SHOWN_QUERY_PARAMETERS else "***") for name, value in pairs]
        parts = parts._replace(query=urlencode(shown, safe="*"))
    return urlunsplit(parts._replace(fragment=""))


def resolve_endpoint(model: str, base_url: str | None = None, api_key_env: str | None = None, *,
                     option_prefix: str = "") -> Endpoint:
    """Where ``model`` is served: ``base_url``, else the provider registry.
    ``option_prefix`` names the running command's options for this role
    (``judge``: ``--judge-base-url``), which the errors tell the user to pass."""
    if base_url:
        return Endpoint(model, base_url.rstrip("/"), api_key_env, option_prefix)
    lowered = model.lower()
    for provider in providers():
        prefix = next((p for p in provider.prefixes if lowered.startswith(p.lower())), None)
        if prefix is not None:
            served = model[len(prefix):] if prefix.endswith("/") else model
            return Endpoint(served, provider.base_url, api_key_env or provider.api_key_env or None, option_prefix)
    known = ", ".join(f"{p.name} ({'/'.join(p.prefixes)}*)" for p in providers())
    raise EndpointError(
        f"don't know where model {model!r} is served: pass {option(option_prefix, 'base-url')}, or add a provider "
        f"to cirrus.toml (known providers: {known})"
    )
