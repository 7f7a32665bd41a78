"""Project settings from ``cirrus.toml``: extra model providers and default
parameters per role.  Command-line options win over the file.

```toml
[[providers]]
name = "inhouse"
base_url = "https://llm.example.internal/v1"
api_key_env = "INHOUSE_LLM_KEY"
prefixes = ["inhouse-"]

[roles.agent]
temperature = 0.3
max_tokens = 2048
extra_body = { enable_thinking = false }

[roles.judge]
rpm = 600
# model = ["judge-a", "judge-b", "judge-c"]   # a judge panel: majority verdict
# structured_output = false   # never send response_format (absent: try it, fall back if refused)

[domain]                 # the business the tickets come from: told to the agent and the judges
description = "an online home-appliance shop: orders, delivery, installation, repairs, returns"
description_zh = "家电网店：订单、配送、安装、维修、退换货"

[judge_input]            # what the coverage judge and fluency checker are sent
candidate_chars = 8000   # the agent's reply: its first N characters
reference_chars = 8000   # the reference reply: its first N characters
history_chars = 24000    # the rendered history: its most recent N characters
```

The ``[judge_input]`` limits apply to every LLM judge built after the file is
loaded (docs/judging.md), and the ``[domain]`` description to every agent and
judge built after it (over the workspace manifest's; docs/domain.md).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from cirrus.llm.providers import Provider, register_providers

SETTINGS_FILE = "cirrus.toml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProviderSettings(_Strict):
    name: str
    base_url: str
    api_key_env: str = ""
    prefixes: list[str] = Field(min_length=1)


class RoleSettings(_Strict):
    # a list (judge only) is a judge panel, kept as the comma list that
    # --judge-model takes (cirrus.evaluate.roles.panel_members)
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None  # checked against the client's list when the role is built
    extra_body: dict[str, Any] | None = None
    timeout: float | None = None
    max_retries: int | None = None
    rpm: float | None = None
    concurrency: int | None = None
    # send the judges' response_format: absent = try it and fall back when refused (cirrus.llm.client)
    structured_output: bool | None = None

    @field_validator("model", mode="before")
    @classmethod
    def _panel(cls, value: Any) -> Any:
        if isinstance(value, list):
            if not value or not all(isinstance(name, str) and name.strip() and "," not in name for name in value):
                raise ValueError("a list of models must hold model names (a judge panel)")
            return ",".join(name.strip() for name in value)
        return value

    def params(self) -> dict[str, Any]:
        """The RoleConfig keywords this file sets."""
        return self.model_dump(exclude_none=True, exclude={"model", "base_url", "api_key_env"})


class JudgeInputSettings(_Strict):
    """``[judge_input]``: the size limits of what LLM judges are sent
    (:class:`cirrus.judges.llm.JudgeInputLimits`; absent keys keep its defaults)."""

    candidate_chars: int | None = Field(default=None, ge=1)
    reference_chars: int | None = Field(default=None, ge=1)
    history_chars: int | None = Field(default=None, ge=1)


class DomainSettings(_Strict):
    """``[domain]``: the business the workspace's tickets come from, one line
    in English and/or Chinese (:mod:`cirrus.domain`); it overrides the
    description ingest wrote to the workspace's manifest."""

    description: str = Field("", max_length=500)
    description_zh: str = Field("", max_length=500)


class Settings(_Strict):
    providers: list[ProviderSettings] = Field(default_factory=list)
    domain: DomainSettings = Field(default_factory=DomainSettings)
    # [agent]: your agent's prompt, tools and names (cirrus.agents.config, docs/agent-config.md),
    # checked by agent_config()
    agent: dict[str, Any] | None = None
    _path: Path | None = PrivateAttr(default=None)
    judge_input: JudgeInputSettings = Field(default_factory=JudgeInputSettings)
    roles: dict[Literal["agent", "judge", "fluency"], RoleSettings] = Field(default_factory=dict)
    # read and checked by `cirrus report` (cirrus.report.loading.load_prices)
    prices: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _panel_only_for_the_judge(self) -> Settings:
        for name, role in self.roles.items():
            if name != "judge" and role.model and "," in role.model:
                raise ValueError(f"roles.{name}.model: only [roles.judge] may list several models (a judge panel)")
        return self

    def role(self, name: Literal["agent", "judge", "fluency"]) -> RoleSettings:
        return self.roles.get(name, RoleSettings())

    def agent_config(self) -> Any:
        """The ``[agent]`` table as an :class:`cirrus.agents.config.AgentConfig`
        (relative paths from the file's folder); None without one.  Raises
        :class:`SettingsError` naming the file and the key."""
        if self.agent is None:
            return None
        from cirrus.agents.config import AgentConfigError, parse_agent_config

        origin = str(self._path) if self._path is not None else SETTINGS_FILE
        try:
            return parse_agent_config(self.agent, origin, self._path.parent if self._path is not None else None)
        except AgentConfigError as exc:
            raise SettingsError(str(exc)) from None

    def judge_input_limits(self) -> Any:
        """The :class:`cirrus.judges.llm.JudgeInputLimits` of ``[judge_input]``."""
        from cirrus.judges.llm import JudgeInputLimits

        return JudgeInputLimits(**self.judge_input.model_dump(exclude_none=True))


class SettingsError(ValueError):
    pass


def load_settings(workspace: Path, explicit: Path | None = None) -> Settings:
    """``explicit``, else ``<workspace>/cirrus.toml``, else the current
    directory's; no file means built-in defaults.  Providers are registered,
    and the ``[judge_input]`` limits (or the defaults) become those of the
    LLM judges built from now on."""
    candidates = [explicit] if explicit else [workspace / SETTINGS_FILE, Path.cwd() / SETTINGS_FILE]
    path = next((p for p in candidates if p is not None and p.is_file()), None)
    if explicit is not None and path is None:
        raise SettingsError(f"settings file {explicit} does not exist")
    if path is None:
        settings = Settings()
        _apply_judge_input(settings)
        return settings
    try:
        settings = Settings.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: invalid TOML: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise SettingsError(f"{path}: {where + ': ' if where else ''}{first['msg']}") from exc
    settings._path = path
    register_providers([Provider(p.name, p.base_url.rstrip("/"), p.api_key_env, tuple(p.prefixes))
                        for p in settings.providers])
    _apply_judge_input(settings)
    return settings


def _apply_judge_input(settings: Settings) -> None:
    from cirrus import domain
    from cirrus.judges.llm import configure_input_limits

    configure_input_limits(settings.judge_input_limits())
    domain.configure(domain.Domain(settings.domain.description, settings.domain.description_zh))
