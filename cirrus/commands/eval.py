"""``cirrus eval --model M``: every task walked checkpoint by checkpoint
against a model and scored (:func:`cirrus.evaluate.runner.run_eval`; with
``--mode subtask`` every checkpoint alone), after the roles are built from
the options and cirrus.toml (:func:`cirrus.evaluate.roles.build_roles`) and
the run's cost estimated (:func:`cirrus.estimate.estimate_run`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

from cirrus.commands._common import EXIT_FAILED, EXIT_INTERRUPTED, WorkspaceOpt, console, fail
from cirrus.commands._eval_output import budget_exit, print_cost, print_estimate, print_subtask_summary, print_summary
from cirrus.evaluate.collector import held_for_the_command
from cirrus.workspace import REPORTS_DIR

__all__ = ["eval_"]


@held_for_the_command  # no full garbage collection in the middle of a run (cirrus/evaluate/collector.py)
def eval_(
    ctx: typer.Context,
    model: Annotated[Optional[str], typer.Option(help="Agent under test: a model name, or baseline:oracle / baseline:retrieval (offline); or give --agent-url / --agent instead.")] = None,
    base_url: Annotated[Optional[str], typer.Option(help="OpenAI-compatible base URL of the agent (default: provider registry).")] = None,
    api_key_env: Annotated[Optional[str], typer.Option(help="Environment variable holding the agent's API key.")] = None,
    judge_model: Annotated[Optional[list[str]], typer.Option(help="Coverage judge model, or 'local' for the offline heuristic (default: the agent's model, a self-judged run that is warned about and recorded; local for baselines). Give it several times, or a comma list, for a judge panel: every member judges every checkpoint, the majority decides (a tie is Not Included).")] = None,
    judge_base_url: Annotated[Optional[str], typer.Option(help="Base URL of the judge (default: the agent's).")] = None,
    judge_api_key_env: Annotated[Optional[str], typer.Option(help="Key variable of the judge (default: the agent's).")] = None,
    fluency_model: Annotated[Optional[str], typer.Option(help="Fluency checker model, or 'local' (default: the judge's).")] = None,
    fluency_base_url: Annotated[Optional[str], typer.Option(help="Base URL of the fluency checker (default: the judge's).")] = None,
    fluency_api_key_env: Annotated[Optional[str], typer.Option(help="Key variable of the fluency checker (default: the judge's).")] = None,
    temperature: Annotated[Optional[float], typer.Option(help="Agent sampling temperature (default: the server's).")] = None,
    max_tokens: Annotated[Optional[int], typer.Option(help="Agent output token limit per model call.")] = None,
    reasoning_effort: Annotated[Optional[str], typer.Option(help="Agent reasoning effort (low/medium/high) for models that take it.")] = None,
    extra_body: Annotated[Optional[str], typer.Option(help="Extra JSON body fields for the agent's requests, e.g. '{\"enable_thinking\": false}'.")] = None,
    pass_k: Annotated[int, typer.Option("--pass-k", min=1, help="K of pass@K and pass^K.")] = 1,
    runs: Annotated[int, typer.Option(min=1, help="Attempts per task (at least --pass-k).")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="(task, attempt) pairs in flight at once; one process is fastest at ~128-256 (benchmarks/README.md).")] = 8,
    run_id: Annotated[Optional[str], typer.Option(help="Name of reports/<run_id>/; the same id resumes a run (one process at a time: another one is refused).")] = None,
    limit: Annotated[Optional[int], typer.Option(min=1, help="Only the first N tasks of tickets/tasks.jsonl.")] = None,
    workspace: WorkspaceOpt = Path("."),
    config: Annotated[Optional[Path], typer.Option(help="Settings file (default: cirrus.toml in the workspace or here).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    mode: Annotated[str, typer.Option(help="walk: the multi-turn walk (default); subtask: every checkpoint alone, after the real dialogue up to it, no fluency check (docs/subtasks.md).")] = "walk",
    estimate: Annotated[bool, typer.Option("--estimate", help="Print the calls, tokens and cost per role the run would take (counted over the workspace, no model called) and stop (docs/cost.md).")] = False,
    max_cost: Annotated[Optional[float], typer.Option(min=0, help="Start no attempt once the run has spent this much (the \\[prices] currency of cirrus.toml; every model the run calls needs a price); attempts in flight finish, the run stops with exit status 3 and resumes with a higher --max-cost.")] = None,
    agent_url: Annotated[Optional[str], typer.Option(help="Your agent as a service: Cirrus POSTs each turn to this URL (docs/agent-protocol.md) and answers its tool calls from the recordings.")] = None,
    agent_auth_env: Annotated[Optional[str], typer.Option(help="Environment variable holding the token sent to --agent-url (never written anywhere).")] = None,
    agent_auth_header: Annotated[str, typer.Option(help="Header the token goes in (Authorization sends 'Bearer <token>').")] = "Authorization",
    agent: Annotated[Optional[str], typer.Option("--agent", help="Your agent in Python: package.module:factory, a factory returning an object with an async respond(request, tools) (cirrus.agents.api).")] = None,
    agent_config: Annotated[Optional[Path], typer.Option(help="File with your agent's \\[agent] section: prompt template, knowledge place, tool set, tool and argument names, matching (docs/agent-config.md; default: \\[agent] of cirrus.toml).")] = None,
    agent_label: Annotated[Optional[str], typer.Option(help="Your agent's version, recorded with the run and shown by cirrus report (default: \\[agent] label).")] = None,
    text_tool_calls: Annotated[bool, typer.Option("--text-tool-calls", help="Read tool calls a model writes as text in its message (a JSON object, <tool_call> tags, ...) as tool calls, marked so in the transcript; off, such a reply is judged as text and noted (benchmarks/README.md). Also \\[agent] text_tool_calls.")] = False,
    tool_server: Annotated[bool, typer.Option("--tool-server", help="With --agent-url: serve the recorded tools over HTTP on 127.0.0.1 for the run; each request tells the agent where (tool_server), and the calls it makes there are scored (docs/tool-server.md).")] = False,
) -> None:
    """Walk every task checkpoint by checkpoint against a model and score it.

    Every model endpoint is checked with one tiny request before the first
    attempt.  Exit status: 0 when the run finished with at least one attempt
    scored; 1 when it could not start (an endpoint check failed, a refused
    key) or every attempt ended in an error; 2 for a bad option, setting or
    workspace (a missing key variable included), or a --run-id that another
    cirrus process is writing (its pid is named); 3 when --max-cost stopped
    the run (resume it with a higher budget); 130 on Ctrl-C, after printing
    the command that resumes the run.
    """
    import asyncio
    import contextlib
    import re
    import shlex
    import time
    import warnings

    from cirrus.estimate import estimate_run
    from cirrus.evaluate.preflight import PreflightError, check_endpoints
    from cirrus.evaluate.roles import SELF_JUDGED_HINT, RoleError, RoleOptions, build_roles
    from cirrus.evaluate.runlock import RunLocked, held_until_done
    from cirrus.evaluate.runner import EvalSettings, run_eval
    from cirrus.evaluate.store import RunMismatch
    from cirrus.evaluate.tasks import TaskFileError, TaskIndex
    from cirrus.evaluate.types import InfrastructureError
    from cirrus.llm.providers import EndpointError, ModelAuthError, shown_url

    chosen = [flag for flag, value in (("--model", model), ("--agent-url", agent_url), ("--agent", agent)) if value]
    if len(chosen) > 1:
        fail(f"give one agent under test: {' and '.join(chosen)} were both given")
    if tool_server and not agent_url:
        fail("--tool-server serves the recorded tools to an agent service: give it with --agent-url")
    agent_name = model or ("http-agent" if agent_url else "python-agent" if agent else None)
    given_run_id = run_id
    run_id = run_id or re.sub(r"[^A-Za-z0-9._-]", "_", f"{agent_name or 'agent'}-{time.strftime('%Y%m%d-%H%M%S')}")

    def resume_command() -> str:
        """``cirrus eval`` with the options given on the command line (key
        variables by name, never a key; credentials in a URL masked), plus
        the ``--run-id`` when it was generated."""
        words = ["cirrus", "eval"]
        for param in ctx.command.params:
            if param.param_type_name != "option" or param.name is None:
                continue
            source = ctx.get_parameter_source(param.name)
            if source is None or source.name != "COMMANDLINE":
                continue
            value = ctx.params.get(param.name)
            flag = max((o for o in param.opts if o.startswith("--")), key=len, default=param.opts[0])
            if param.is_flag:
                words += [flag] if value else []
            elif isinstance(value, (list, tuple)):  # a repeatable option
                for item in value:
                    words += [flag, str(item)]
            elif value is not None:
                words += [flag, str(shown_url(value) if param.name.endswith("base_url") else value)]
        if given_run_id is None:
            words += ["--run-id", run_id]
        return shlex.join(words)

    resume = resume_command()
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,100}", run_id) or run_id.startswith("."):
        fail(f"--run-id {run_id!r}: use letters, digits, '.', '_' and '-' only")
    if mode not in ("walk", "subtask"):
        fail(f"unknown --mode {mode!r}; choose walk or subtask")
    from cirrus.settings import SettingsError, load_settings

    try:
        settings_file = load_settings(workspace, config)
    except SettingsError as exc:
        fail(str(exc))
    cli_params = {k: v for k, v in {"temperature": temperature, "max_tokens": max_tokens,
                                    "reasoning_effort": reasoning_effort, "extra_body": extra_body}.items()
                  if v is not None}

    def role(name: str, model_: str | None, base_url_: str | None, key_env: str | None, params: dict) -> RoleOptions | None:
        configured = settings_file.role(name)  # type: ignore[arg-type]
        chosen = model_ or configured.model
        if chosen is None:
            return None
        return RoleOptions(chosen, base_url_ or configured.base_url, key_env or configured.api_key_env,
                           {**configured.params(), **params})

    from cirrus.agents.config import AgentConfigError, load_agent_config
    from cirrus.evaluate.roles import AgentSource

    source = None
    if agent_url or agent:
        source = AgentSource(url=agent_url, auth_env=agent_auth_env, auth_header=agent_auth_header, spec=agent,
                             params=settings_file.role("agent").params())
    try:
        your_agent = load_agent_config(agent_config) if agent_config else settings_file.agent_config()
    except (AgentConfigError, SettingsError) as exc:
        fail(str(exc))
    agent_role = role("agent", agent_name, base_url, api_key_env, cli_params) if source is None else \
        RoleOptions(agent_name or "agent", base_url, api_key_env)  # --base-url: the judges' default endpoint
    if agent_role is None:
        fail("no agent under test: give --model (or [roles.agent] model in cirrus.toml), --agent-url or --agent")
    agent_options = agent_role
    # [agent] describes your agent: its label is not a baseline's (an explicit --agent-label always counts)
    label = agent_label or (your_agent.label if your_agent is not None and not (
        source is None and agent_options.model.startswith("baseline:")) else None)
    judge = role("judge", ",".join(judge_model) if judge_model else None, judge_base_url, judge_api_key_env, {})
    fluency = role("fluency", fluency_model, fluency_base_url, fluency_api_key_env, {})
    if mode == "subtask":  # a subtask run asks no fluency question: no fluency endpoint is used or checked
        if fluency_model:
            console.print("[yellow]note:[/] --fluency-model is not used with --mode subtask")
        fluency = RoleOptions("local")

    def warn(text: str) -> None:
        console.print(f"[yellow]warning:[/] {escape(text)}")

    def note(text: str) -> None:
        console.print(escape(text))

    from cirrus.pricing import PriceError, parse_prices

    try:
        prices = parse_prices(settings_file.prices, "cirrus.toml: prices")
    except PriceError as exc:
        fail(str(exc))

    async def main() -> dict:
        with warnings.catch_warnings(record=True) as caught:  # a damaged cache moved aside: said as a warning line
            warnings.simplefilter("always", RuntimeWarning)
            roles = build_roles(agent_options, judge, fluency, index, workspace, concurrency=concurrency,
                                source=source, agent_config=your_agent, agent_label=label,
                                text_tool_calls=text_tool_calls)
        for caught_warning in caught:
            if issubclass(caught_warning.category, RuntimeWarning):
                warn(str(caught_warning.message))
            else:
                warnings.showwarning(caught_warning.message, caught_warning.category, caught_warning.filename,
                                     caught_warning.lineno)
        models = {name: client.model for name, client in roles.clients.items()}
        unpriced = sorted({m for m in models.values() if m not in prices})
        if max_cost is not None and unpriced:
            await roles.aclose()
            raise ValueError(f"--max-cost needs a price for every model the run calls; none for "
                             f"{', '.join(map(repr, unpriced))}: add [prices.\"MODEL\"] input_per_mtok and "
                             "output_per_mtok to cirrus.toml (docs/cost.md)")
        def count() -> Any:
            return estimate_run(roles, index.tasks(), workspace, max(runs, pass_k), prices, mode)

        if estimate:
            try:
                print_estimate(count(), max(runs, pass_k), final=True)
            except Exception as exc:  # noqa: BLE001
                raise ValueError(f"no estimate: {exc}") from exc
            finally:
                await roles.aclose()
            return {}

        def show_estimate(counted: asyncio.Future) -> None:
            if counted.cancelled():
                return
            if counted.exception() is not None:  # a run does not depend on its estimate
                warn(f"no estimate: {counted.exception()}")
            else:
                print_estimate(counted.result(), max(runs, pass_k), final=False)

        counting: list[asyncio.Future] = []

        async def preflight() -> Any:
            """The endpoint check, with the run's estimate counted in a thread
            once the check's requests are on their way: the first request
            leaves without waiting for the count, and the first attempt
            starts without waiting for it either (it is shown when ready)."""
            checking = asyncio.ensure_future(check_endpoints(roles.clients, warn))
            await asyncio.sleep(0)  # the check's requests start first
            # (vcrpy and tiktoken, which the count and the walks both load lazily, load under a lock; httpx,
            # which the SDK looks up per request, is imported before: cirrus/replay.py)
            counted = asyncio.ensure_future(asyncio.to_thread(count))
            counted.add_done_callback(show_estimate)
            counting.append(counted)
            return await checking
        selfish = roles.details.get("self_judged_roles") or []
        if selfish:
            which = " and ".join({"judge": "the coverage judge", "fluency": "the fluency checker"}[r] for r in selfish)
            warn(f"the run grades the agent with itself: {which} {'is' if len(selfish) == 1 else 'are'} the agent's "
                 f"own model {agent_options.model!r} at the same endpoint, so its scores are self-graded (recorded as "
                 f"self_judged in run.json and summary.json); {SELF_JUDGED_HINT}")
        describe = getattr(roles.agent, "describe", None)
        if describe is not None:  # an agent service: checked, and what it says of itself recorded in run.json
            try:
                await describe()
            except InfrastructureError as exc:
                await roles.aclose()
                raise PreflightError(str(exc)) from None
            roles.details.update({k: v for k, v in roles.agent.details().items() if v is not None})
        served = contextlib.ExitStack()
        if tool_server:  # the agent calls its tools itself, here, for the run's length
            from cirrus.tools.server import serve_tools

            roles.agent.tool_server = served.enter_context(serve_tools(workspace, index=index))
            note(f"tool server for the agent at {roles.agent.tool_server.url}")
        try:
            settings = EvalSettings(workspace=workspace, run_id=run_id, runs=max(runs, pass_k), pass_k=pass_k,
                                    concurrency=concurrency, limit=limit, progress=not quiet,
                                    fingerprint_extra=roles.fingerprint, details_extra=roles.details, mode=mode,
                                    client_models=models, prices=prices, max_cost=max_cost)
            return await run_eval(settings, roles.agent, roles.judge, roles.fluency, index,
                                  preflight=preflight, notify=note)
        finally:
            if counting:  # the count's thread ends before the clients close under it
                await asyncio.wait(counting)
            await roles.aclose()
            served.close()

    try:
        index = TaskIndex.scan(workspace, limit)
        with held_until_done(workspace / REPORTS_DIR / run_id):  # through the outputs, not just the attempts
            summary = asyncio.run(main())
    except RunLocked as exc:  # another process is writing this run
        fail(str(exc))
    except KeyboardInterrupt:
        console.print(f"\n[yellow]interrupted:[/] the attempts already finished are kept; resume the run with:\n"
                      f"  {escape(resume)}")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except PreflightError as exc:
        fail(f"the run cannot start, no task was run:\n{exc}", code=EXIT_FAILED)
    except ModelAuthError as exc:
        fail(str(exc), code=EXIT_FAILED)
    except (TaskFileError, RoleError, EndpointError, RunMismatch, ValueError) as exc:
        fail(str(exc))
    except OSError as exc:  # a full disk, a read-only workspace
        fail(f"could not write the run to {workspace / 'reports' / run_id}: {exc.strerror or exc}",
             code=EXIT_FAILED)
    if estimate:
        return
    if mode == "subtask":
        print_subtask_summary(summary, workspace / REPORTS_DIR / run_id)
        print_cost(summary)
        budget_exit(summary, resume)
        if summary["n_subtasks"] and not summary["n_ok"]:
            fail(f"every subtask of run {run_id} ended in an error (reasons above); no score was measured",
                 code=EXIT_FAILED)
        return
    print_summary(summary, workspace / REPORTS_DIR / run_id)
    print_cost(summary)
    if summary["attempts"] and summary["errors"] == summary["attempts"]:
        fail(f"every attempt of run {run_id} ended in an error (reasons above); no score was measured",
             code=EXIT_FAILED)
    budget_exit(summary, resume)
