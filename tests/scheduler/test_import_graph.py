"""The scheduler's import graph has no cycles, and plugins do not import each other.

The graph is read from the source with ``ast``, so a cycle fails here even when Python's import
order happens to cope with it today. Every ``import`` counts, also those inside functions (a
lazy import is still a dependency); those under ``if TYPE_CHECKING:`` count only as type-only
edges, and one cycle made with such an edge is allowed, inside ``framework/``. Run this file as
a script to print the cycles.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import stromboli.core.scheduler as scheduler_package

ROOT = Path(scheduler_package.__file__).parent
PACKAGE = scheduler_package.__name__
FRAMEWORK = f"{PACKAGE}.framework"
PLUGINS = f"{PACKAGE}.plugins"


@dataclass
class Graph:
    """Modules of the scheduler and their imports of each other."""

    files: dict[str, Path] = field(default_factory=dict)
    packages: set[str] = field(default_factory=set)
    runtime: dict[str, set[str]] = field(default_factory=dict)
    typing_only: dict[str, set[str]] = field(default_factory=dict)

    def edges(self, with_types: bool) -> dict[str, set[str]]:
        if not with_types:
            return self.runtime
        return {m: self.runtime[m] | self.typing_only[m] for m in self.files}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, typing_only: bool = False) -> Iterator[tuple[ast.stmt, bool]]:
    """Every import statement in ``tree`` (functions included) and whether it is type-only."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, typing_only
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), True)
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), typing_only)
        else:
            yield from _imports(node, typing_only)


def _targets(graph: Graph, importer: str, node: ast.stmt) -> set[str]:
    """Scheduler modules an import statement runs: the named ones and their packages."""
    named: list[str] = []
    if isinstance(node, ast.Import):
        named = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = importer if importer in graph.packages else importer.rpartition(".")[0]
            for _ in range(node.level - 1):
                anchor = anchor.rpartition(".")[0]
            base = f"{anchor}.{base}" if base else anchor
        named = [base] + [f"{base}.{alias.name}" for alias in node.names]
    found: set[str] = set()
    for name in named:
        while name.startswith(PACKAGE):
            # Importing a.b.c runs a/__init__ and a/b/__init__ first, unless the importer
            # lives inside them (then they are already under way).
            if name in graph.files and not importer.startswith(f"{name}."):
                found.add(name)
            name = name.rpartition(".")[0]
    found.discard(importer)
    return found


def build_graph(root: Path = ROOT) -> Graph:
    graph = Graph()
    for path in sorted(root.rglob("*.py")):
        name = module_name(path, root)
        graph.files[name] = path
        if path.name == "__init__.py":
            graph.packages.add(name)
    for name, path in graph.files.items():
        tree = ast.parse(path.read_text(), str(path))
        graph.runtime[name], graph.typing_only[name] = set(), set()
        for node, typing_only in _imports(tree):
            edges = graph.typing_only if typing_only else graph.runtime
            edges[name] |= _targets(graph, name, node)
    return graph


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Components of more than one module (or a module importing itself), Tarjan's way."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative, so a deep graph cannot exhaust the recursion limit.
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges.get(node, ()):
                    found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def plugin_of(module: str) -> str | None:
    """The plugin a module belongs to: ``plugins.<name>`` (a module or a package)."""
    if not module.startswith(f"{PLUGINS}."):
        return None
    return ".".join(module.split(".")[: PLUGINS.count(".") + 2])


def cross_plugin_imports(graph: Graph) -> list[tuple[str, str]]:
    """(importer, imported) pairs where one plugin imports another plugin's module."""
    pairs = []
    for importer in sorted(graph.files):
        own = plugin_of(importer)
        if own is None:
            continue
        for target in sorted(graph.edges(with_types=True)[importer]):
            other = plugin_of(target)
            if target == PLUGINS or (other is not None and other != own):
                pairs.append((importer, target))
    return pairs


# -- the checks -----------------------------------------------------------------------------------


def test_the_graph_is_read() -> None:
    graph = build_graph()
    session = f"{FRAMEWORK}.session"
    assert session in graph.files
    assert f"{PACKAGE}.api.job" in graph.runtime[session]


def test_no_runtime_import_cycle() -> None:
    cycles = strongly_connected(build_graph().edges(with_types=False))
    assert cycles == [], f"import cycles in the scheduler: {cycles}"


def test_type_only_cycles_stay_inside_the_framework() -> None:
    cycles = strongly_connected(build_graph().edges(with_types=True))
    outside = [c for c in cycles if not all(m.startswith(f"{FRAMEWORK}.") for m in c)]
    assert outside == [], f"type-only import cycles outside framework/: {outside}"
    assert len(cycles) <= 1, f"more than one type-only cycle in framework/: {cycles}"


def test_plugins_do_not_import_each_other() -> None:
    pairs = cross_plugin_imports(build_graph())
    assert pairs == [], (
        "a plugin imports another plugin; move what they share to scheduler/util/ "
        f"or the framework: {pairs}"
    )


def test_framework_knows_no_built_in_action_or_plugin() -> None:
    graph = build_graph()
    for module in graph.files:
        if module == FRAMEWORK or module.startswith(f"{FRAMEWORK}."):
            wrong = {
                t
                for t in graph.edges(with_types=True)[module]
                if t.startswith((f"{PACKAGE}.actions", PLUGINS))
            }
            assert not wrong, f"{module} imports {sorted(wrong)}"


# -- the checker itself can fail ------------------------------------------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_lazy_import_cycle_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": f"from {PACKAGE} import b\n",
            "b.py": f"def f():\n    from {PACKAGE}.a import x\n",
        },
    )
    cycles = strongly_connected(build_graph(root).edges(with_types=False))
    assert cycles == [[f"{PACKAGE}.a", f"{PACKAGE}.b"]]


def test_a_type_only_import_is_not_a_runtime_edge(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": f"import {PACKAGE}.b\n",
            "b.py": (
                "from typing import TYPE_CHECKING\n"
                f"if TYPE_CHECKING:\n    from {PACKAGE}.a import A\n"
            ),
        },
    )
    graph = build_graph(root)
    assert strongly_connected(graph.edges(with_types=False)) == []
    assert strongly_connected(graph.edges(with_types=True)) == [[f"{PACKAGE}.a", f"{PACKAGE}.b"]]


def test_a_package_init_closes_a_cycle(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "p/__init__.py": f"from {PACKAGE}.p import x\n",
            "p/x.py": "",
            "user.py": f"from {PACKAGE}.p.x import thing\n",
            "p/y.py": f"from {PACKAGE} import user\n",
            "p/z.py": "",
        },
    )
    graph = build_graph(root)
    assert f"{PACKAGE}.p" in graph.runtime[f"{PACKAGE}.user"]
    # p.x reaching its own package is no edge: the package is imported before its modules.
    assert f"{PACKAGE}.p" not in graph.runtime[f"{PACKAGE}.p.y"]


def test_one_plugin_importing_another_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "plugins/__init__.py": "",
            "plugins/a.py": f"from {PLUGINS}.b import helper\n",
            "plugins/b.py": "",
            "plugins/c/__init__.py": "",
            "plugins/c/main.py": f"from {PLUGINS}.c.part import x\n",
            "plugins/c/part.py": "",
        },
    )
    assert cross_plugin_imports(build_graph(root)) == [(f"{PLUGINS}.a", f"{PLUGINS}.b")]


if __name__ == "__main__":
    found = build_graph()
    problems = strongly_connected(found.edges(with_types=False))
    typed = strongly_connected(found.edges(with_types=True))
    for cycle in problems:
        print("runtime cycle:", " -> ".join(cycle))
    for cycle in typed:
        if cycle not in problems:
            print("type-only cycle:", " -> ".join(cycle))
    for importer, target in cross_plugin_imports(found):
        print("plugin imports plugin:", importer, "->", target)
    sys.exit(1 if problems or cross_plugin_imports(found) else 0)
