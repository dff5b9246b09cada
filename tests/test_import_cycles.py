"""No import cycle among azr's modules, lazy imports (inside functions) included: data flows one way.

The graph has an edge A -> B for every `import`/`from ... import` in A that loads azr module B, wherever it sits in
A, `if TYPE_CHECKING:` blocks included (never executed, but a type named across a cycle is a circle a reader
follows), except a package's modules importing the package's own face (how a face re-exports: `azr.training.run`
importing `azr.training` is not an edge). `from pkg import name` loads `pkg.name` when that is a module, else the
face `pkg`. scripts/house_figures.py counts the same graph with and without TYPE_CHECKING imports.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "azr"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _skipped(tree: ast.AST) -> set[int]:
    """Ids of the nodes inside `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`) blocks."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                skip |= {id(sub) for sub in ast.walk(node)}
    return skip


def import_graph(type_checking: bool = True) -> dict[str, set[str]]:
    """Module -> the azr modules it loads; `type_checking` False leaves out imports under `if TYPE_CHECKING:`."""
    modules = _modules()

    def loaded(base: str, name: str | None) -> str | None:
        if name and f"{base}.{name}" in modules:
            return f"{base}.{name}"
        return base if base in modules else None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        skip = set() if type_checking else _skipped(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str | None] = []
            if isinstance(node, ast.Import):
                targets = [loaded(a.name, None) or loaded(a.name.rpartition(".")[0], None) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{anchor}.{base}" if base else anchor
                targets = [loaded(base, a.name) for a in node.names]
            for target in targets:
                if not target or target == module or not target.startswith("azr"):
                    continue
                if target != "azr" and module.startswith(target + "."):
                    continue  # a package's own face
                graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
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
    return found


def test_the_graph_sees_lazy_imports():
    graph = import_graph()
    assert "azr.training" in graph and "azr.rollouts.dynamic" in graph
    assert "azr.rollouts.trl_batch" in graph["azr.rollouts.tensors"]  # a module-level import
    assert "azr.training.trainer" not in graph["azr.training"]  # the face's lazy table is strings: not an edge
    # an import inside a function is an edge
    assert any("azr.evaluation" in targets for name, targets in graph.items() if name.startswith("azr.training."))


def test_a_cycle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_type_checking_imports_are_edges():
    graph, executed = import_graph(), import_graph(type_checking=False)
    assert "azr.rollouts" in graph["azr.evaluation.callback"]  # TrainerBatches, for the annotation only
    assert "azr.rollouts" not in executed["azr.evaluation.callback"]


def test_no_import_cycle_among_azrs_modules():
    found = cycles(import_graph())
    assert not found, "\n".join(" <-> ".join(c) for c in found)
