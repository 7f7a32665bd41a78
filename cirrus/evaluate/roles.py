"""Build the agent, judge and fluency checker of a run from command-line
options (contract section 3).

``baseline:*`` agents and the ``local`` judge run offline.  Any other name is
a model on an OpenAI-compatible endpoint: ``--base-url`` / ``--api-key-env``,
or the provider registry for bare names.  The agent's base URL and key
variable are the defaults of the judge and fluency checker; the judge model
defaults to the agent model (``local`` when the agent is a baseline), the
fluency model to the judge model.

A judge or fluency checker that is the agent's own model (same model name at
the same endpoint), by default or given explicitly, grades the agent with
itself: :func:`self_judged_roles` names those roles, the run records
``self_judged`` (``run.json`` details, ``summary.json``) and ``cirrus eval``
warns (:data:`SELF_JUDGED_HINT`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cirrus.agents.baselines import OracleAgent, RetrievalAgent
from cirrus.domain import Domain, workspace_domain
from cirrus.evaluate.types import Agent, CoverageJudge, FluencyChecker
from cirrus.judges.local import LocalCoverageJudge, LocalFluencyChecker
from cirrus.llm.providers import shown_url

BASELINES = ("baseline:oracle", "baseline:retrieval")
LOCAL = "local"
CACHE_DIR = Path(".cirrus-cache")


SELF_JUDGED_HINT = ("set a fixed judge with --judge-model MODEL (and --fluency-model), or "
                    "[roles.judge] model = \"...\" / [roles.fluency] model = \"...\" in cirrus.toml")


def self_judged_roles(clients: dict[str, Any]) -> list[str]:
    """The roles among ``judge`` and ``fluency`` whose model client is the
    agent's own model at the same endpoint (model name and resolved base URL
    equal; for a judge panel, any member: ``judge[1]``, ``judge[2]``, ...);
    ``[]`` for an offline agent (a baseline) or offline judges."""
    agent = clients.get("agent")
    if agent is None:
        return []

    def key(client: Any) -> tuple[str, str]:
        endpoint = client.role.endpoint
        return str(endpoint.model), str(endpoint.base_url or "").rstrip("/")

    judged = {name.split("[")[0] for name, client in clients.items()
              if name != "agent" and key(client) == key(agent)}
    return [name for name in ("judge", "fluency") if name in judged]


class RoleError(ValueError):
    pass


@dataclass
class Roles:
    agent: Agent
    judge: CoverageJudge
    fluency: FluencyChecker
    fingerprint: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    pool: Any = None  # cirrus.llm.client.ClientPool when a model is used
    # the model clients by role ("agent", "judge", "fluency"), for the endpoint
    # check before a run (cirrus.evaluate.preflight); offline parts have none
    clients: dict[str, Any] = field(default_factory=dict)

    def use_batch(self, collector: Any) -> bool:
        """Put the model clients in batch mode (a
        :class:`cirrus.llm.batching.BatchCollector`); ``False`` when no role
        uses a model (nothing to batch)."""
        if self.pool is None:
            return False
        self.pool.use_batch(collector)
        return True

    async def aclose(self) -> None:
        close = getattr(self.agent, "aclose", None)  # an agent service's HTTP client
        if close is not None:
            await close()
        if self.pool is not None:
            await self.pool.aclose()
            cache = getattr(self.pool, "cache", None)  # opened for these roles: closed with them, not at exit
            if cache is not None:
                cache.close()


@dataclass(frozen=True)
class RoleOptions:
    """One role as the command line gives it."""

    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    params: dict[str, Any] = field(default_factory=dict)  # RoleConfig.from_options keywords
    # the prefix of the running command's options for this role, named in errors ("judge": --judge-base-url,
    # "": --base-url); None: the role's own (cirrus eval's and rescore's names)
    option_prefix: str | None = None


def _open_cache(cache_class: Any, directory: Path) -> Any:
    """The judges' response cache; a disk too full to create it is a
    :class:`~cirrus.files.DiskFullError`, not a database traceback, and any
    other database error a :class:`RoleError` naming the file (a damaged
    file is moved aside by the cache itself: :mod:`cirrus.llm.cache`)."""
    import sqlite3

    from cirrus.files import DiskFullError, disk_full, is_disk_full

    path = directory / cache_class.FILENAME
    try:
        return cache_class(directory)
    except sqlite3.Error as exc:
        if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            raise DiskFullError(path) from exc
        raise RoleError(f"could not open the response cache {path}: {exc}; check that the folder can be written, "
                        f"or move the file aside (mv {path} {path}.old): it only saves calls, none is lost") from exc
    except OSError as exc:
        if is_disk_full(exc):
            raise disk_full(exc, directory) from exc
        raise


def _fingerprint(part: Any) -> Any:
    return part.fingerprint() if hasattr(part, "fingerprint") else {"name": part.name}


def panel_members(model: str) -> list[str]:
    """The judge models of a ``--judge-model`` value: one name, or a comma
    list of a panel's members (``"a,b,c"``; spaces around names ignored)."""
    names = [name.strip() for name in model.split(",")]
    if any(not name for name in names):
        raise RoleError(f"judge model list {model!r} has an empty name; separate names with single commas")
    if len(set(names)) != len(names):
        raise RoleError(f"judge model list {model!r} names a model twice; a panel needs distinct judges")
    return names


@dataclass(frozen=True)
class AgentSource:
    """An agent under test that is not a model Cirrus prompts itself: a
    service speaking the agent protocol (``url``, docs/agent-protocol.md) or
    a Python factory (``spec``, ``package.module:factory``)."""

    url: str | None = None
    auth_env: str | None = None
    auth_header: str = "Authorization"
    spec: str | None = None
    params: dict[str, Any] = field(default_factory=dict)  # [roles.agent] timeout, max_retries, rpm, concurrency, ...

    def __post_init__(self) -> None:
        if (self.url is None) == (self.spec is None):
            raise RoleError("give the agent as a service (--agent-url) or as a Python factory (--agent), not both")


_HTTP_PARAMS = ("timeout", "max_retries", "retry_initial_wait", "retry_max_wait", "rpm", "concurrency")


def _tool_view_of(tasks: Iterable[dict[str, Any]], config: Any) -> Any:
    """The function giving a task's tools as the agent knows them
    (:func:`cirrus.agents.config.tool_view`) under ``config``: the
    workspace's whole tool set, or the ticket's own."""
    from cirrus.agents.config import AgentConfig, tool_view, workspace_tools
    from cirrus.tool_matching import matching_from_schemas

    config = config or AgentConfig()
    everything = workspace_tools(tasks) if config.tool_set == "workspace" else []
    rules = matching_from_schemas(everything)
    tool_view(everything, config, rules)  # a config naming tools the workspace lacks fails here, before the run

    def view_of(task: dict[str, Any]) -> Any:
        tools = everything if config.tool_set == "workspace" else task.get("tools") or []
        return tool_view(tools, config, matching_from_schemas(tools))

    return view_of


def _check_template(config: Any, tasks: Iterable[dict[str, Any]], view_of: Any, domain: Domain) -> None:
    """Render ``[agent]``'s prompt template for the first task, so that a
    variable it does not know fails before the run, not in every attempt."""
    from cirrus.agents.config import render_template, template_context

    template = config.template_text()
    first = next(iter(tasks), None)
    if template is not None and first is not None:
        render_template(template, template_context(first, view_of(first).schemas, domain.text()))


def _source_agent(source: AgentSource, tasks: Iterable[dict[str, Any]], workspace: Path, config: Any,
                  concurrency: int | None) -> Agent:
    from cirrus.agents.config import AgentConfigError

    try:
        view_of = _tool_view_of(tasks, config)
    except AgentConfigError as exc:
        raise RoleError(str(exc)) from None
    if source.url is not None:
        from cirrus.agents.http_agent import HttpAgent, HttpAgentConfig

        try:
            http = HttpAgentConfig(source.url, auth_env=source.auth_env, auth_header=source.auth_header,
                                   max_rounds=config.max_model_calls if config is not None else 8,
                                   **{k: v for k, v in source.params.items() if k in _HTTP_PARAMS and v is not None})
        except ValueError as exc:
            raise RoleError(f"--agent-url: {exc}") from None
        return HttpAgent(http, ceiling=concurrency, tool_view=view_of)
    from cirrus.agents.loader import AgentLoadError, load_agent

    try:
        return load_agent(str(source.spec), tool_view=view_of, workspace=workspace, tasks=list(tasks))
    except AgentLoadError as exc:
        raise RoleError(str(exc)) from None


def build_roles(agent: RoleOptions, judge: RoleOptions | None, fluency: RoleOptions | None,
                tasks: Iterable[dict[str, Any]], workspace: Path, *, concurrency: int | None = None,
                domain: Domain | None = None, source: AgentSource | None = None,
                agent_config: Any = None, agent_label: str | None = None, text_tool_calls: bool = False) -> Roles:
    """``tasks`` is read only by the retrieval baseline (its reply index).
    ``domain``: the business the agent's default system prompt and the
    judges' prompts name (default: :func:`cirrus.domain.workspace_domain`,
    ``[domain]`` of cirrus.toml or the workspace manifest's).  ``source``:
    an agent service or Python factory under test instead of a model
    (``agent`` then only names it; the judge defaults to ``local``, as for a
    baseline); ``agent_config``: the ``[agent]`` section
    (:class:`cirrus.agents.config.AgentConfig`), its digest and label
    recorded with the run; ``agent_label``: the agent's version, recorded;
    ``text_tool_calls``: a model agent reads tool calls written as text
    (:mod:`cirrus.agents.text_tool_calls`).
    ``concurrency`` (``cirrus eval --concurrency``) is the ceiling of every
    endpoint's adaptive window of requests in flight (docs/concurrency.md).
    A judge model naming several models (``"a,b,c"``) is a judge panel
    (:class:`cirrus.judges.panel.JudgePanel`) whose members share the judge's
    endpoint, key and parameters; the fluency checker then defaults to its
    first member."""
    is_baseline = agent.model.startswith("baseline:") or source is not None
    if source is None and is_baseline and agent.model not in BASELINES:
        raise RoleError(f"unknown baseline {agent.model!r}; choose one of {', '.join(BASELINES)}")
    judge = judge or RoleOptions(LOCAL if is_baseline else agent.model)
    members = panel_members(judge.model)
    fluency = fluency or RoleOptions(members[0], judge.base_url, judge.api_key_env)
    # the agent's endpoint is the default of the others
    judge = RoleOptions(judge.model, judge.base_url or agent.base_url, judge.api_key_env or agent.api_key_env,
                        {"temperature": 0.0, **judge.params}, judge.option_prefix)
    fluency = RoleOptions(fluency.model, fluency.base_url or judge.base_url, fluency.api_key_env or judge.api_key_env,
                          {"temperature": 0.0, **{k: v for k, v in judge.params.items() if k != "temperature"},
                           **fluency.params}, fluency.option_prefix)

    domain = domain if domain is not None else workspace_domain(workspace)
    pool = None
    clients: dict[str, Any] = {}

    def client(options: RoleOptions, name: str):  # noqa: ANN202
        nonlocal pool
        from cirrus.llm.cache import ResponseCache
        from cirrus.llm.client import ClientPool, RoleConfig

        if pool is None:
            pool = ClientPool(_open_cache(ResponseCache, workspace / CACHE_DIR), ceiling=concurrency)
        prefix = options.option_prefix
        if prefix is None:
            prefix = "" if name == "agent" else name.split("[", 1)[0]
        clients[name] = pool.client(RoleConfig.from_options(options.model, options.base_url, options.api_key_env,
                                                            option_prefix=prefix, **{"name": name, **options.params}))
        return clients[name]

    if source is not None:
        agent_part: Agent = _source_agent(source, tasks, workspace, agent_config, concurrency)
    elif agent.model == "baseline:oracle":
        agent_part = OracleAgent()
    elif agent.model == "baseline:retrieval":
        agent_part = RetrievalAgent(tasks)
    else:
        from cirrus.agents.config import AgentConfigError
        from cirrus.agents.openai_agent import OpenAIAgent
        from cirrus.agents.prompts import agent_system_prompt

        view_of = None
        if agent_config is not None:  # your prompt, tool set and names; without [agent] the ticket's own tools
            try:
                view_of = _tool_view_of(tasks, agent_config)
                _check_template(agent_config, tasks, view_of, domain)
            except AgentConfigError as exc:
                raise RoleError(str(exc)) from None
        agent_part = OpenAIAgent(client(agent, "agent"), system_prompt=agent_system_prompt(domain),
                                 config=agent_config, tool_view_of=view_of, domain=domain.text(),
                                 text_tool_calls=text_tool_calls or bool(agent_config and agent_config.text_tool_calls),
                                 **({"max_model_calls": agent_config.max_model_calls} if agent_config else {}))
    def coverage_judge(model: str, name: str) -> CoverageJudge:
        if model == LOCAL:
            return LocalCoverageJudge()
        from cirrus.judges import prompts
        from cirrus.judges.llm import LLMCoverageJudge

        return LLMCoverageJudge(client(RoleOptions(model, judge.base_url, judge.api_key_env, judge.params,
                                                   judge.option_prefix), name),
                                system_prompt=prompts.coverage_system(domain),
                                later_system_prompt=prompts.coverage_later_system(domain))

    if len(members) == 1:
        judge_part: CoverageJudge = coverage_judge(members[0], "judge")
    else:
        from cirrus.judges.panel import JudgePanel

        judge_part = JudgePanel([coverage_judge(model, f"judge[{number}]")
                                 for number, model in enumerate(members, 1)])
    if fluency.model == LOCAL:
        fluency_part: FluencyChecker = LocalFluencyChecker()
    else:
        from cirrus.judges import prompts
        from cirrus.judges.llm import LLMFluencyChecker

        fluency_part = LLMFluencyChecker(client(fluency, "fluency"), system_prompt=prompts.fluency_system(domain))
    fingerprint = {"agent_role": _fingerprint(agent_part), "judge_role": _fingerprint(judge_part),
                   "fluency_role": _fingerprint(fluency_part)}
    if agent_config is not None and agent.model not in BASELINES:  # what the agent sees under [agent] (not its
        # label): a resume must keep it; the offline baselines read none of it
        fingerprint["agent_config"] = agent_config.digest()
    if isinstance(judge_part, LocalCoverageJudge):
        fingerprint["judge_role"] = {"name": judge_part.name,
                                     "thresholds": [judge_part.key_threshold, judge_part.word_threshold]}
    details = {"agent_base_url": shown_url(agent.base_url), "judge_base_url": shown_url(judge.base_url),
               "fluency_base_url": shown_url(fluency.base_url),
               "api_key_envs": sorted({o.api_key_env for o in (agent, judge, fluency) if o.api_key_env}),
               # the names of the variables (never a key): cirrus rescore's default for the run's own judge
               "judge_api_key_env": judge.api_key_env,
               # what the prompts were told of the business (cirrus.domain); its text is in their hashes
               **({"domain": domain.to_dict()} if domain.is_set else {})}
    if agent_label:  # --agent-label or [agent] label: the agent's version, for cirrus report
        details["agent_label"] = agent_label
    agent_details = getattr(agent_part, "details", None)
    if callable(agent_details):  # an agent service or factory: its kind, URL (masked), version
        details.update({key: value for key, value in agent_details().items() if value is not None})
    selfish = self_judged_roles(clients)
    details["self_judged"] = bool(selfish)
    details["self_judged_roles"] = selfish
    return Roles(agent_part, judge_part, fluency_part, fingerprint, details, pool, clients)
