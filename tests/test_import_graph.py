"""The import graph of ``cirrus/`` (issue 23): no circles, no upward imports.

The graph is read from the source with :mod:`ast`: every ``import`` and
``from ... import`` statement at any level (a function's body, ``if
TYPE_CHECKING:`` and ``try:`` blocks included: an import inside a function
still ties the two modules together), relative imports resolved, and
``from package import name`` counted as an import of ``package.name`` when
that is a module.  ``import a.b.c`` and ``from a.b import c`` (``c`` a module)
count as imports of ``a.b.c`` alone: the ``__init__`` of ``a`` and ``a.b``
runs too, but an edge to every package above a module imported would tie
every module to its package's re-exports.

One kind of edge is left out: a module importing a package that holds it
(``cirrus.llm.client.chat`` importing ``cirrus.llm.client``, any module's
``from cirrus import __version__``).  Python runs a package's ``__init__``
before any of its submodules, so that import adds no order of its own; it is
how a submodule reaches a name its package re-exports (or lets a test patch).
The other way round is kept: a package's ``__init__`` importing its own
submodules to re-export them is normal, and an outside module importing the
package imports those submodules too, so a circle through a re-export
(``cirrus.llm.batching -> cirrus.llm.client -> cirrus.llm.client.chat ->
cirrus.llm.batching``) is found.

Two rules:

* no strongly connected component of the graph holds more than one module
  (a circle, named module by module when found);
* only the command layer (``cirrus.cli`` and ``cirrus.commands.*``) imports
  ``typer``, ``rich`` (the terminal is the commands' to print on), ``cirrus.cli``
  or ``cirrus.commands``.

On the code before issue 23 the first rule found six circles (``cli`` with
``report.command``, ``report.diff``, ``report.html`` and ``report.subtask``;
``evaluate.runner`` with ``evaluate.subtask``; ``evaluate.rescore`` with
``evaluate.recorded`` and ``judges.consistency``; ``audit`` with
``leak_check``; ``ingest.deid.engine`` with ``ingest.deid.gazetteer``;
``llm.batching`` with ``llm.client`` and ``llm.client.chat``) and the second
ten imports of typer or ``cirrus.cli`` in nine modules (more with rich).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "cirrus"
COMMAND_LAYER = ("cirrus.cli", "cirrus.commands")
TERMINAL_PACKAGES = ("typer", "rich")  # imported by the command layer only


def module_files(root: Path = PACKAGE_ROOT) -> dict[str, Path]:
    """Every module under ``root`` by its dotted name (a package by its
    ``__init__``'s file)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_package(name: str, modules: dict[str, Path]) -> bool:
    return modules[name].name == "__init__.py"


def imported_names(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """Every module that ``name`` imports, in- or outside ``cirrus`` (dotted
    names; an outside module by the name written)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if _is_package(name, modules) else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[:len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
            if len(submodules) < len(node.names):  # a name defined in ``base`` itself
                yield base
            yield from submodules  # from package import module


def _owner(target: str, modules: dict[str, Path]) -> str | None:
    """The ``cirrus`` module that an imported name is (or lies in), if any."""
    while target:
        if target in modules:
            return target
        target = target.rpartition(".")[0]
    return None


def import_graph(root: Path = PACKAGE_ROOT) -> dict[str, set[str]]:
    """Module -> the ``cirrus`` modules it imports (itself left out)."""
    modules = module_files(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target in imported_names(name, path, modules):
            owner = _owner(target, modules)
            if owner is not None and owner != name:
                graph[name].add(owner)
    return graph


def _without_ancestors(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` less the edges from a module to a package that holds it
    (see the module docstring)."""
    return {name: {t for t in targets if not name.startswith(t + ".")} for name, targets in graph.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's
    algorithm, iterative), each sorted, sorted by their first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def _cycle_in(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One circle through ``component``'s first module: a -> b -> ... -> a."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    return paths[node] + [start]
                if child not in paths:
                    paths[child] = paths[node] + [child]
                    following.append(child)
        frontier = following
    return component  # not reached: a component of several modules holds a circle


def _in_command_layer(name: str) -> bool:
    return any(name == layer or name.startswith(layer + ".") for layer in COMMAND_LAYER)


def upward_imports(root: Path = PACKAGE_ROOT) -> list[str]:
    """``module -> target`` for every import of ``typer``, ``rich`` or the
    command layer by a module outside it."""
    modules = module_files(root)
    found = []
    for name, path in modules.items():
        if _in_command_layer(name):
            continue
        for target in sorted(set(imported_names(name, path, modules))):
            if target.split(".")[0] in TERMINAL_PACKAGES or _in_command_layer(target):
                found.append(f"{name} -> {target}")
    return found


def test_the_import_graph_has_no_circles() -> None:
    graph = _without_ancestors(import_graph())
    found = circles(graph)
    assert not found, "import circles in cirrus/:\n" + "\n".join(
        "  " + " -> ".join(_cycle_in(component, graph)) + f"   (component: {', '.join(component)})"
        for component in found)


def test_only_the_command_layer_imports_typer_rich_or_the_commands() -> None:
    found = upward_imports()
    assert not found, "modules outside cirrus.cli / cirrus.commands import the command layer, typer or rich:\n" + \
        "\n".join(f"  {line}" for line in found)


def test_the_check_finds_a_circle_and_an_upward_import(tmp_path: Path) -> None:
    """The checks themselves: a circle through a function-level import and a
    relative import, and a domain module importing the command line."""
    root = tmp_path / "cirrus"
    (root / "report").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "cli.py").write_text("import typer\nfrom cirrus.report import command\n")
    (root / "report" / "__init__.py").write_text("from cirrus.report import command\n")  # a re-export
    (root / "report" / "loading.py").write_text("import cirrus.report as package\n")  # an ancestor: no edge
    (root / "report" / "command.py").write_text("def f():\n    from cirrus.cli import app\n"
                                                "    from rich.table import Table\n")
    (root / "report" / "html.py").write_text("from . import diff\n")
    (root / "report" / "diff.py").write_text("def g():\n    from .html import render\n")
    graph = _without_ancestors(import_graph(root))
    assert circles(graph) == [["cirrus.cli", "cirrus.report.command"], ["cirrus.report.diff", "cirrus.report.html"]]
    assert _cycle_in(["cirrus.cli", "cirrus.report.command"], graph) == ["cirrus.cli", "cirrus.report.command",
                                                                          "cirrus.cli"]
    assert upward_imports(root) == ["cirrus.report.command -> cirrus.cli", "cirrus.report.command -> rich.table"]
