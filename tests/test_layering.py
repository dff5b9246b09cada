"""Imports go one way, and the light modules never import the heavy stack at module level."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "azr"
HEAVY = {"torch", "transformers", "trl", "peft", "datasets", "accelerate", "vllm", "unsloth", "bitsandbytes"}
LIGHT = [
    "schema",
    "logs",
    "legacy",
    "config",
    "runstate",
    "data",
    "prompts",
    "harness",
    "grading",
    "rewards",
    "cli",
    "resilience",
    "clients",
    "passk",
    "humaneval",
    "eval_samples",
    "eval_report",
    "samplers",
    "evaluate",
    "vllm_sidecar",
    "scoreboard",
    "selfplay",
    "teacher",
    "replay",
    "arena",
    "mutants",
]
# module -> azr modules it may import (directly or lazily)
ALLOWED = {
    "schema": set(),
    "logs": set(),
    "legacy": {"schema"},
    "config": {"schema", "logs", "data", "legacy"},
    "runstate": {"config", "logs"},
    "data": {"schema"},
    "prompts": set(),
    "harness": set(),
    "grading": {"config", "data", "harness", "sandbox"},
    "rewards": {"config", "data", "grading", "prompts", "sandbox"},
    "modeling": {"config", "data"},
    "resilience": set(),
    "clients": {"resilience", "schema"},
    "sft": {"data", "grading", "logs", "mutants", "prompts"},
    "mutants": set(),
    "passk": set(),
    "humaneval": {"data", "prompts", "schema"},
    "eval_samples": {"data", "humaneval", "logs", "schema"},
    "eval_report": {"data", "eval_samples", "humaneval", "logs", "passk"},
    "samplers": {"clients", "config", "humaneval", "modeling", "prompts", "schema"},
    "evaluate": {
        "config",
        "data",
        "eval_report",
        "eval_samples",
        "grading",
        "humaneval",
        "logs",
        "prompts",
        "rewards",
        "samplers",
        "schema",
    },
    "scoreboard": {"logs"},
    "selfplay": {"clients", "data", "grading", "logs", "prompts", "rewards"},
    "teacher": {"clients", "data", "grading", "logs", "prompts", "rewards", "selfplay"},
    "replay": set(),
    "arena": {"clients", "logs", "replay", "rewards", "scoreboard", "selfplay", "teacher"},
    "trainer": {"prompts", "rewards"},
    "callbacks": {"logs"},
    "modelcard": {"config"},
    "vllm_sidecar": {"config", "schema"},  # config only for type hints
    "train": {
        "schema",
        "config",
        "data",
        "grading",
        "logs",
        "modeling",
        "prompts",
        "rewards",
        "runstate",
        "sandbox",
        "sft",
        "evaluate",
        "trainer",
        "callbacks",
        "modelcard",
        "arena",
        "selfplay",
    },
}


def _imports(module: str, top_level_only: bool) -> set[str]:
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == "azr":  # `from azr import mod`: the modules count
            names |= {
                f"azr.{a.name}"
                for a in node.names
                if (PACKAGE / f"{a.name}.py").exists() or (PACKAGE / a.name).is_dir()
            }
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("module", LIGHT)
def test_light_modules_do_not_import_heavy_packages_at_module_level(module):
    assert not {n.split(".")[0] for n in _imports(module, top_level_only=True)} & HEAVY


@pytest.mark.parametrize("module", sorted(ALLOWED))
def test_imports_go_one_way(module):
    used = {n.split(".")[1] for n in _imports(module, top_level_only=False) if n.startswith("azr.")}
    assert used <= ALLOWED[module], used - ALLOWED[module]


def test_no_module_is_too_long():
    lengths = {p.name: len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    assert max(lengths.values()) <= 400, lengths


@pytest.mark.parametrize("path", sorted((PACKAGE / "sandbox").glob("*.py")), ids=lambda p: p.name)
def test_sandbox_knows_nothing_above_it(path):
    """The sandbox runs programs; it knows nothing of tests, rewards, config or the heavy stack."""
    tree = ast.parse(path.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert all(not n.startswith("azr.") or n.startswith("azr.sandbox") for n in names), names
    assert not {n.split(".")[0] for n in names} & HEAVY


def test_the_worker_is_standard_library_only():
    """worker.py runs under the bare interpreter inside the sandbox (python -I -S): no azr, no site-packages."""
    tree = ast.parse((PACKAGE / "sandbox" / "worker.py").read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert names <= set(sys.stdlib_module_names), names - set(sys.stdlib_module_names)
