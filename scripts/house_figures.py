"""Print the house figures of a source tree: parameters typed `Any`, modules outside `training/trl/` (TRL's
adapter) that import trl, the top-level modules of `training/`, import cycles among modules (with and without
`if TYPE_CHECKING:` imports), module docstrings over six lines, and the module count and lines. Reads the files only
(ast); imports nothing of azr.

    python3 scripts/house_figures.py [ROOT]        # ROOT: a checkout (default: this one)
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

ANY = ("Any", "typing.Any", "'Any'")
LONG_DOCSTRING = 6  # lines


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under root/azr."""
    out = {}
    for path in sorted((root / "azr").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def any_parameters(tree: ast.AST) -> int:
    """Function parameters whose annotation is `Any` (as the project's before-stop hook counts them)."""
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            count += sum(a.annotation is not None and ast.unparse(a.annotation) in ANY for a in args)
    return count


def imports_trl(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "trl" or a.name.startswith("trl.") for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "trl":
            return True
    return False


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                skip |= {id(sub) for sub in ast.walk(node)}
    return skip


def import_graph(root: Path, type_checking: bool = True) -> dict[str, set[str]]:
    """Module -> the azr modules it imports, wherever the import sits (lazy imports included), except a package's
    modules importing the package's own face (how a face re-exports). `from pkg import name` loads `pkg.name` when
    that is a module, else the face `pkg`. `type_checking` counts imports under `if TYPE_CHECKING:` too (the house
    rule, tests/test_import_cycles.py, which draws its graph here)."""
    mods = modules(root)
    trees = {m: ast.parse(p.read_text(), str(p)) for m, p in mods.items()}

    def loaded(base: str, name: str | None) -> str | None:
        if name and f"{base}.{name}" in mods:
            return f"{base}.{name}"
        return base if base in mods else None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, path in mods.items():
        tree = trees[module]
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        skip = set() if type_checking else _type_checking_nodes(tree)
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
                    continue
                graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
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


def package_of(module: str) -> str:
    """`azr.training.run` -> `training`; a top-level module (`azr.alarms`) is its own room."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "azr"


def main(root: Path) -> None:
    mods = modules(root)
    trees = {m: ast.parse(p.read_text(), str(p)) for m, p in mods.items()}
    lines = sum(len(p.read_text().splitlines()) for p in mods.values())
    any_by_package: Counter[str] = Counter()
    for m, t in trees.items():
        any_by_package[package_of(m)] += any_parameters(t)
    trl = sorted(m for m, t in trees.items() if imports_trl(t) and not m.startswith("azr.training.trl"))
    training_top = sorted(m for m, p in mods.items() if p.parent == root / "azr" / "training")
    docs = [ast.get_docstring(t, clean=True) for t in trees.values()]
    long_docs = sum(bool(d) and len(d.splitlines()) > LONG_DOCSTRING for d in docs)
    strict = cycles(import_graph(root, type_checking=False))
    typed = cycles(import_graph(root, type_checking=True))
    print(f"modules: {len(mods)}, lines: {lines}")
    print(f"parameters typed Any: {sum(any_by_package.values())}")
    print("  by package: " + ", ".join(f"{k} {v}" for k, v in any_by_package.most_common() if v))
    print(f"modules outside azr/training/trl/ importing trl: {len(trl)}" + (f" ({', '.join(trl)})" if trl else ""))
    print(f"top-level modules in azr/training/: {len(training_top)}")
    print(f"import cycles (lazy imports included, TYPE_CHECKING excluded): {len(strict)}")
    print(f"import cycles (TYPE_CHECKING imports included too): {len(typed)}")
    for component in typed:
        print("  " + " <-> ".join(component))
    print(f"module docstrings over {LONG_DOCSTRING} lines: {long_docs}/{len(docs)} ({long_docs / len(docs):.0%})")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent))
