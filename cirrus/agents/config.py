"""Your agent's own configuration: ``[agent]`` of ``cirrus.toml`` (or the
file of ``cirrus eval --agent-config FILE``), docs/agent-config.md.

What a production agent brings that Cirrus's default agent does not:

* its **system prompt**, a Jinja2 template (``system_prompt_file``, or
  ``system_prompt`` inline) rendered per task with :data:`TEMPLATE_VARIABLES`
  (never the reference replies or reference tool calls);
* where the **knowledge** goes: appended to the system prompt (``system``,
  the default, as Cirrus's own agent does), as a user-visible context message
  before the conversation (``message``), behind a search function the model
  may call (``tool``: :mod:`cirrus.agents.knowledge_tool`), or nowhere
  (``none``: an agent that retrieves on its own);
* the **tool set** it is offered: every tool the workspace knows
  (``workspace``, what a production agent has) or only the tools its own
  ticket called (``ticket``, Cirrus's behaviour before this option);
* its **tool names and argument names** (``[agent.tools.<recorded name>]``
  ``name = "lookup_order"``, ``arguments = {order = "order_id"}``), mapped onto
  the recorded calls so that the cassette still answers, and per-argument
  **matching** (``match = {reason = "ignored"}``, :mod:`cirrus.tool_matching`);
* how many **model calls** a turn may take (``max_model_calls``), and
  whether tool calls a model writes as text are read as calls
  (``text_tool_calls``, or ``cirrus eval --text-tool-calls``);
* a **label** for its version (``label = "v2.3"``, or ``--agent-label``),
  shown by ``cirrus report``.

Everything here is part of the run's fingerprint (:meth:`AgentConfig.digest`):
a run cannot be resumed with another configuration.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cirrus.tool_matching import RULES, ToolMatching, without_rules

# What a system-prompt template may use.  None of it is taken from a
# checkpoint's reference: the agent under test must not see the answers.
TEMPLATE_VARIABLES = {
    "task_id": "the task's id",
    "category": "the ticket's service category ('' when none)",
    "channel": "the ticket's channel, e.g. online-chat, email ('' when none)",
    "language": "the ticket's language code (en, zh, ...)",
    "domain": "the workspace's domain description ('' when none; docs/domain.md)",
    "knowledge": "the task's knowledge documents: a list of {doc_id, title, text}",
    "knowledge_text": "the same documents rendered as Cirrus renders them (Markdown sections)",
    "tools": "the tools offered, as the agent sees them: a list of {name, description}",
    "context": "the customer context the helpdesk showed before the conversation: a list of lines "
               "(empty when none; a template that uses it places it, else Cirrus appends it)",
    "context_text": "the same lines rendered as Cirrus renders them (a Markdown list)",
}
KNOWLEDGE_PLACES = ("system", "message", "tool", "none")
TOOL_SETS = ("workspace", "ticket")


class AgentConfigError(ValueError):
    """A bad ``[agent]`` section: the message names the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AgentToolConfig(_Strict):
    """``[agent.tools.<recorded name>]``: how the agent knows one recorded tool."""

    name: str | None = Field(None, pattern=r"^[A-Za-z0-9_-]{1,64}$")  # the agent's name for it
    description: str | None = None
    # the agent's own parameter schema (in its argument names); default: the recorded schema, renamed
    parameters: dict[str, Any] | None = None
    arguments: dict[str, str] = Field(default_factory=dict)  # the agent's argument name -> the recorded one
    match: dict[str, str] = Field(default_factory=dict)  # recorded argument path -> exact | normalized | ignored

    @field_validator("match")
    @classmethod
    def _rules(cls, value: dict[str, str]) -> dict[str, str]:
        for path, rule in value.items():
            if rule not in RULES:
                raise ValueError(f"match.{path} is {rule!r}; use one of {', '.join(RULES)}")
        return value


class AgentConfig(_Strict):
    """``[agent]``; every key is optional (see the module doc)."""

    label: str | None = Field(None, max_length=100)
    system_prompt: str | None = None
    system_prompt_file: Path | None = None
    knowledge: Literal["system", "message", "tool", "none"] = "system"
    # knowledge = "tool": the search function's name and how many passages it returns
    knowledge_tool: str = Field("search_knowledge", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    knowledge_top_k: int = Field(3, ge=1, le=20)
    tool_set: Literal["workspace", "ticket"] = "workspace"
    max_model_calls: int = Field(8, ge=1, le=100)
    # read tool calls a model writes as text in its message (cirrus.agents.text_tool_calls); off: noted, judged as text
    text_tool_calls: bool = False
    tools: dict[str, AgentToolConfig] = Field(default_factory=dict)
    # the folder relative paths are read from (the config file's); not a key of the file
    base_dir: Path | None = Field(None, exclude=True)

    def template_text(self) -> str | None:
        """The system-prompt template, read from ``system_prompt_file`` when given."""
        if self.system_prompt is not None and self.system_prompt_file is not None:
            raise AgentConfigError("[agent] sets both system_prompt and system_prompt_file; keep one")
        if self.system_prompt_file is None:
            return self.system_prompt
        path = self.system_prompt_file
        if not path.is_absolute() and self.base_dir is not None:
            path = self.base_dir / path
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise AgentConfigError(f"[agent] system_prompt_file {path}: {exc.strerror or exc}") from None

    def digest(self) -> str:
        """A hash of everything the agent sees or does differently under this
        configuration (the template's text, not its path; not the label)."""
        data = self.model_dump(mode="json", exclude={"label", "system_prompt_file", "base_dir"})
        data["system_prompt"] = self.template_text()
        if self.knowledge != "tool":  # meaningless then: configurations made before them keep their digest
            del data["knowledge_tool"], data["knowledge_top_k"]
        return hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def parse_agent_config(data: Mapping[str, Any], origin: str, base_dir: Path | None = None) -> AgentConfig:
    """``data`` (the ``[agent]`` table) as an :class:`AgentConfig`;
    :class:`AgentConfigError` naming ``origin`` and the key."""
    try:
        config = AgentConfig.model_validate({**data, "base_dir": base_dir})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise AgentConfigError(f"{origin}: [agent] {where}: {first['msg']}") from None
    config.template_text()  # a missing template file is an error now, not at the first turn
    return config


def load_agent_config(path: Path) -> AgentConfig:
    """The ``[agent]`` table of a TOML file (``--agent-config FILE``; a file
    holding only the table's keys is read as the table)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise AgentConfigError(f"agent config {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise AgentConfigError(f"agent config {path}: invalid TOML: {exc}") from None
    table = data.get("agent", data) if isinstance(data.get("agent", data), Mapping) else data
    return parse_agent_config(table, str(path), path.parent)


# --------------------------------------------------------------------------
# The tools as the agent sees them
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolView:
    """The recorded tools under the agent's names: the schemas it is sent,
    and the way back from its calls to the recorded ones."""

    schemas: tuple[dict[str, Any], ...]
    to_recorded_name: Mapping[str, str]  # the agent's tool name -> the recorded one
    to_recorded_args: Mapping[str, Mapping[str, str]]  # recorded tool -> the agent's argument -> recorded
    matching: ToolMatching  # recorded tool -> argument path -> rule

    def recorded_call(self, name: str, arguments: Any) -> tuple[str, Any]:
        """The recorded tool and arguments of a call the agent made under its
        own names (argument names renamed at the top level; arguments that
        are not a JSON object are passed on as they are)."""
        recorded = self.to_recorded_name.get(name, name)
        renames = self.to_recorded_args.get(recorded)
        if renames and isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return recorded, arguments
        if renames and isinstance(arguments, Mapping):
            arguments = {renames.get(key, key): value for key, value in arguments.items()}
        return recorded, arguments


def _rename_schema(function: Mapping[str, Any], tool: AgentToolConfig) -> dict[str, Any]:
    renamed = dict(function)
    if tool.name:
        renamed["name"] = tool.name
    if tool.description is not None:
        renamed["description"] = tool.description
    if tool.parameters is not None:
        renamed["parameters"] = tool.parameters
    elif tool.arguments:
        back = {recorded: own for own, recorded in tool.arguments.items()}
        parameters = dict(function.get("parameters") or {})
        properties = parameters.get("properties")
        if isinstance(properties, Mapping):
            parameters["properties"] = {back.get(k, k): v for k, v in properties.items()}
        if isinstance(parameters.get("required"), list):
            parameters["required"] = [back.get(k, k) for k in parameters["required"]]
        renamed["parameters"] = parameters
    return renamed


def tool_view(tools: Iterable[Mapping[str, Any]], config: AgentConfig | None,
              matching: ToolMatching | None = None) -> ToolView:
    """The agent's view of ``tools`` (OpenAI function schemas under their
    recorded names) under ``config``; ``matching``: the rules the schemas
    declare (``x-cirrus-match``), which the config's ``match`` extends."""
    rules: dict[str, dict[str, str]] = {name: dict(r) for name, r in (matching or {}).items()}
    schemas, names, args = [], {}, {}
    configured = config.tools if config is not None else {}
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            continue
        recorded = function["name"]
        own = configured.get(recorded)
        if own is not None:
            function = _rename_schema(function, own)
            if own.arguments:
                args[recorded] = dict(own.arguments)
            if own.match:
                rules.setdefault(recorded, {}).update(own.match)
        if function["name"] in names:
            raise AgentConfigError(f"[agent.tools] gives two tools the name {function['name']!r} "
                                   f"({names[function['name']]} and {recorded})")
        names[function["name"]] = recorded
        schemas.append({"type": "function", "function": without_rules(dict(function))})
    if config is not None and config.knowledge == "tool" and config.knowledge_tool in names:
        raise AgentConfigError(f"[agent] knowledge_tool {config.knowledge_tool!r} is also the name of the recorded "
                               f"tool {names[config.knowledge_tool]}; choose another name")
    unknown = sorted(set(configured) - {n for n in names.values()})
    if unknown and config is not None and config.tool_set == "workspace" and schemas:
        raise AgentConfigError(f"[agent.tools] names tools the workspace does not know: {', '.join(unknown)} "
                               f"(known: {', '.join(sorted(names.values()))})")
    return ToolView(tuple(schemas), names, args, {k: v for k, v in rules.items() if v})


def replay_matching(agent: Any, task: Mapping[str, Any]) -> ToolMatching | None:
    """The argument-matching rules the replay of ``agent``'s calls in
    ``task`` uses: its tool view's (the schemas' ``x-cirrus-match`` and
    ``[agent.tools.*] match``); None for an agent without a view (the
    replayer then reads the task's schemas)."""
    view_of = getattr(agent, "tool_view_of", None) or getattr(agent, "tool_view", None)
    if not callable(view_of):
        return None
    return getattr(view_of(task), "matching", None)


def workspace_tools(tasks: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every tool the workspace knows: the union of its tasks' ``tools`` by
    name (the first schema of a name wins), in order of first appearance."""
    seen: dict[str, dict[str, Any]] = {}
    for task in tasks:
        for tool in task.get("tools") or ():
            function = tool.get("function") if isinstance(tool, Mapping) else None
            name = function.get("name") if isinstance(function, Mapping) else None
            if isinstance(name, str) and name not in seen:
                seen[name] = dict(tool)
    return list(seen.values())


# --------------------------------------------------------------------------
# The system prompt
# --------------------------------------------------------------------------


def template_context(task: Mapping[str, Any], schemas: Sequence[Mapping[str, Any]], domain: str) -> dict[str, Any]:
    """The variables of :data:`TEMPLATE_VARIABLES` for ``task``."""
    from cirrus.agents.prompts import render_context, render_knowledge

    documents = [{"doc_id": str(d.get("doc_id") or ""), "title": str(d.get("title") or ""),
                  "text": str(d.get("text") or "")} for d in task.get("knowledge") or []]
    return {
        "task_id": str(task.get("task_id") or ""), "category": str(task.get("category") or ""),
        "channel": str(task.get("channel") or ""), "language": str(task.get("language") or "en"),
        "domain": domain, "knowledge": documents, "knowledge_text": render_knowledge(documents),
        "tools": [{"name": s["function"]["name"], "description": str(s["function"].get("description") or "")}
                  for s in schemas],
        "context": [str(line) for line in task.get("context") or ()],
        "context_text": render_context([str(line) for line in task.get("context") or ()]),
    }


def uses_variable(template: str, *names: str) -> bool:
    """Whether ``template`` reads any of the variables ``names`` (or a
    variable named after one, ``context_text`` for ``context``)."""
    import jinja2
    from jinja2 import meta
    from jinja2.sandbox import SandboxedEnvironment

    try:
        found = meta.find_undeclared_variables(SandboxedEnvironment().parse(template))
    except jinja2.TemplateError:
        return False  # rendering says what is wrong
    return any(variable == name or variable.startswith(f"{name}_") for variable in found for name in names)


def render_template(template: str, context: Mapping[str, Any], origin: str = "[agent] system prompt") -> str:
    """``template`` rendered in Jinja2's sandbox; a variable it does not
    know is an error naming it (never an empty string)."""
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    environment = SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False)
    try:
        return environment.from_string(template).render(**context).strip()
    except jinja2.UndefinedError as exc:
        raise AgentConfigError(f"{origin}: {exc.message}; the template may use {', '.join(TEMPLATE_VARIABLES)}") \
            from None
    except jinja2.TemplateError as exc:
        raise AgentConfigError(f"{origin}: {type(exc).__name__}: {exc}") from None


__all__ = ["AgentConfig", "AgentConfigError", "AgentToolConfig", "KNOWLEDGE_PLACES", "TEMPLATE_VARIABLES",
           "TOOL_SETS", "ToolView", "load_agent_config", "parse_agent_config", "render_template", "replay_matching",
           "template_context", "tool_view", "uses_variable", "workspace_tools"]
