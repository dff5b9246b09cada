"""No import cycle among azr's modules, lazy imports (inside functions) included: data flows one way.

The graph has an edge A -> B for every `import`/`from ... import` in A that loads azr module B, wherever it sits in
A, `if TYPE_CHECKING:` blocks included (never executed, but a type named across a cycle is a circle a reader
follows), except a package's modules importing the package's own face (how a face re-exports: `azr.training.run`
importing `azr.training` is not an edge). `from pkg import name` loads `pkg.name` when that is a module, else the
face `pkg`. The graph and its cycles are scripts/house_figures.py's, which prints the figure on any checkout.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("house_figures", ROOT / "scripts" / "house_figures.py")
figures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(figures)
cycles = figures.cycles


def import_graph(type_checking: bool = True) -> dict[str, set[str]]:
    return figures.import_graph(ROOT, type_checking)


def test_the_graph_sees_lazy_imports():
    graph = import_graph()
    assert "azr.training" in graph and "azr.rollouts.dynamic" in graph
    assert "azr.rollouts.seam" in graph["azr.rollouts.tensors"]  # a module-level import
    assert "azr.training.trl.trainer" not in graph["azr.training"]  # the face's lazy table is strings: not an edge
    # an import inside a function is an edge
    assert any("azr.evaluation" in targets for name, targets in graph.items() if name.startswith("azr.training."))


def test_a_cycle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_type_checking_imports_are_edges():
    graph, executed = import_graph(), import_graph(type_checking=False)
    assert "azr.rollouts" in graph["azr.evaluation.callback"]  # TrainerView, for the annotation only
    assert "azr.rollouts" not in executed["azr.evaluation.callback"]


def test_no_import_cycle_among_azrs_modules():
    found = cycles(import_graph())
    assert not found, "\n".join(" <-> ".join(c) for c in found)
