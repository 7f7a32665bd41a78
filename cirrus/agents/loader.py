"""Load an agent written in Python from ``package.module:factory``
(``cirrus eval --agent``; docs/agent-protocol.md, "Your agent in Python").

:func:`load_agent` imports the module, calls the factory (a function or a
class) with the keyword context it accepts, checks that the result has an
``async def respond(request, tools)`` (:class:`cirrus.agents.api.Agent`) and
wraps it for the evaluator (:class:`~cirrus.agents.python_agent.PythonAgent`).
Every failure is an :class:`AgentLoadError` that says what to fix.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cirrus.agents.python_agent import PythonAgent
from cirrus.agents.recording import ToolViewOf, agent_view

# the keyword context cirrus eval gives a factory (a factory takes the ones it names, or **kwargs)
CONTEXT_KEYS = ("workspace", "tasks")
EXAMPLE = "--agent mypackage.agent:make_agent"


class AgentLoadError(ValueError):
    """An ``--agent`` spec that names no usable agent; the message says why and what to do."""


def parse_spec(spec: str) -> tuple[str, str]:
    """``(module, attribute)`` of ``"package.module:factory"`` (the attribute
    may be dotted: ``module:Class.create``)."""
    if not isinstance(spec, str) or ":" not in spec:
        raise AgentLoadError(f"agent {spec!r} is not MODULE:FACTORY: write the module's import path, a colon and "
                             f"the name of the function or class that makes the agent, e.g. {EXAMPLE}")
    module, _, attribute = spec.strip().partition(":")
    if not _dotted(module):
        raise AgentLoadError(f"agent {spec!r}: {module!r} is not a module's import path (dotted Python names, "
                             f"e.g. mypackage.agent; not a file path), e.g. {EXAMPLE}")
    if not _dotted(attribute):
        raise AgentLoadError(f"agent {spec!r}: {attribute!r} is not the name of a function or class in the module "
                             f"(a Python name after the one colon), e.g. {EXAMPLE}")
    return module, attribute


def _dotted(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


def load_agent(spec: str, *, search_path: str | Path | None = ".", tool_view: ToolViewOf | None = None,
               **context: Any) -> PythonAgent:
    """The agent that the factory named by ``spec`` makes.

    ``context`` is what the factory may ask for by keyword (it gets the ones
    its signature names, or all with ``**kwargs``): ``workspace`` (the
    workspace's :class:`~pathlib.Path`) and ``tasks`` (the workspace's tasks,
    each as :func:`~cirrus.agents.api.public_task` shows it), and any other
    keyword the caller passes.  ``search_path`` (default: the current folder)
    is put in front of ``sys.path`` if missing, so a module beside the
    workspace is found as ``python -m`` would find it; ``None`` leaves
    ``sys.path`` alone.  ``tool_view`` (not given to the factory): the tools
    as the agent knows them (:class:`~cirrus.agents.recording.AgentToolView`,
    its own names mapped back to the recorded calls)."""
    module_name, attribute = parse_spec(spec)
    if "tasks" in context and context["tasks"] is not None:
        context["tasks"] = [agent_view(task, tool_view)[0] for task in context["tasks"]]
    if search_path is not None:
        folder = str(Path(search_path).resolve())
        if folder not in sys.path:
            sys.path.insert(0, folder)
    module = _import(module_name, spec)
    factory = _attribute(module, module_name, attribute, spec)
    agent = _make(factory, spec, context)
    check_agent(agent, spec)
    return PythonAgent(agent, spec, tool_view=tool_view)


def _import(module_name: str, spec: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing == module_name or module_name.startswith(missing + "."):
            raise AgentLoadError(
                f"agent {spec!r}: no module {missing!r} is importable here: install the package that holds it into "
                f"this environment (pip install -e PATH), run cirrus from the folder that holds it, or add that "
                f"folder to PYTHONPATH") from None
        raise AgentLoadError(f"agent {spec!r}: module {module_name!r} imports {missing!r}, which is not installed "
                             f"in this environment: install it (pip install ...) and try again") from exc
    except Exception as exc:  # noqa: BLE001  (any error of the user's module)
        raise AgentLoadError(f"agent {spec!r}: importing module {module_name!r} failed with "
                             f"{type(exc).__name__}: {exc}; fix the module (python -c 'import {module_name}' "
                             f"shows the whole traceback)") from exc


def _attribute(module: Any, module_name: str, attribute: str, spec: str) -> Any:
    value = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            where = module_name if value is module else f"{module_name}:{attribute.rsplit('.', 1)[0]}"
            known = _callables(module) if value is module else []
            hint = f"; it defines {', '.join(known)}" if known else ""
            raise AgentLoadError(f"agent {spec!r}: {where} has no attribute {part!r}{hint}: name the function or "
                                 f"class that makes your agent after the colon")
        value = getattr(value, part)
    if not callable(value):
        raise AgentLoadError(f"agent {spec!r}: {attribute!r} is a {type(value).__name__}, not callable: name a "
                             f"function or class that makes the agent (called with the context keywords "
                             f"{', '.join(CONTEXT_KEYS)})")
    return value


def _callables(module: Any) -> list[str]:
    """The public functions and classes defined in ``module`` itself."""
    names = [name for name, value in vars(module).items()
             if not name.startswith("_") and (inspect.isfunction(value) or inspect.isclass(value))
             and getattr(value, "__module__", None) == module.__name__]
    return sorted(names)[:12]


def _make(factory: Any, spec: str, context: Mapping[str, Any]) -> Any:
    """Call ``factory`` with the context keywords its signature takes."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # some builtins and C classes have none: give them nothing
        signature = None
    kwargs = dict(_accepted(signature, context)) if signature is not None else {}
    if signature is not None:
        missing = [name for name, p in signature.parameters.items()
                   if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and name not in kwargs]
        if missing:
            given = ", ".join(context) or "none"
            raise AgentLoadError(f"agent {spec!r}: the factory needs {', '.join(missing)}, which Cirrus does not "
                                 f"give (it gives the keywords {given}): give those parameters defaults, or take "
                                 f"only the context keywords")
    try:
        agent = factory(**kwargs)
    except Exception as exc:  # noqa: BLE001  (any error of the user's factory)
        raise AgentLoadError(f"agent {spec!r}: the factory raised {type(exc).__name__}: {exc}") from exc
    if inspect.isawaitable(agent):
        close = getattr(agent, "close", None)
        if callable(close):
            close()  # never awaited: no "coroutine was never awaited" warning
        raise AgentLoadError(f"agent {spec!r}: the factory is async (it returned an awaitable): make it a plain "
                             f"function or class; only respond is async")
    return agent


def _accepted(signature: inspect.Signature, context: Mapping[str, Any]) -> Iterable[tuple[str, Any]]:
    parameters = signature.parameters
    takes_all = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    for name, value in context.items():
        parameter = parameters.get(name)
        if takes_all or (parameter is not None and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD,
                                                                      parameter.KEYWORD_ONLY)):
            yield name, value


def check_agent(agent: Any, spec: str) -> None:
    """Raise :class:`AgentLoadError` unless ``agent`` has an ``async def
    respond(request, tools)``."""
    shape = "`async def respond(self, request, tools) -> AgentTurn` (cirrus.agents.api.Agent)"
    respond = getattr(agent, "respond", None)
    if respond is None:
        raise AgentLoadError(f"agent {spec!r}: the factory returned a {type(agent).__name__}, which has no respond "
                             f"method: return an object with {shape}")
    if not callable(respond):
        raise AgentLoadError(f"agent {spec!r}: respond of the {type(agent).__name__} is not a method: define {shape}")
    if not inspect.iscoroutinefunction(respond):
        raise AgentLoadError(f"agent {spec!r}: respond of the {type(agent).__name__} is not async: define it as "
                             f"{shape}")
    try:
        inspect.signature(respond).bind(object(), object())
    except TypeError:
        raise AgentLoadError(f"agent {spec!r}: respond of the {type(agent).__name__} does not take (request, tools): "
                             f"define {shape}") from None
    except ValueError:  # no signature to read: let the first turn tell
        pass
