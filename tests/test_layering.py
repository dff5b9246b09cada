"""The house rules of azr/: packages import one way, through each other's faces, and the light ones stay light.

`ALLOWED` is the table of edges between packages (a package may always import its own modules). Read it as
"these are the packages this one may use": sandbox <- rewards <- training <- cli; rollouts <- training / evaluation /
tools / envs / serving (the rollout seam, episodes and their runner, the samplers, which adapter mode's server is
one of); tools <- envs (the environments and `azr gen`) <- training / evaluation / cli; remote <- selfplay /
evaluation / tools; models <- training / evaluation / tools; tools <- training; rewards <- absolute_zero <- training /
evaluation / cli. Nothing imports cli. `config`'s section types are the bottom layer: every package but
`data` (which config reads) and `sandbox` (which knows nothing above it) may take a typed section, so no function
needs `cfg: Any`.

Length is a question for review, not a rule (docs/architecture.md): no test caps a module's lines.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "azr"
HEAVY = {"torch", "transformers", "trl", "peft", "datasets", "accelerate", "vllm", "unsloth", "bitsandbytes"}
SHARED = {
    "alarms",
    "errors",
    "inputs",
    "logs",
    "prompts",
    "secrets",
    "terminal",
}  # top-level modules every concern may use
# package (or shared module) -> the packages it may import, directly or lazily
ALLOWED: dict[str, set[str]] = {
    "alarms": set(),
    "errors": set(),
    "inputs": set(),
    "logs": set(),
    "prompts": set(),
    "secrets": set(),
    "terminal": set(),
    "config": {"data"},
    "data": set(),
    "sandbox": {"config"},  # open_provider takes the recipe's sandbox: section
    "rewards": {"config", "data", "sandbox"},
    "models": {"config", "data"},
    "remote": {"config"},
    "serving": {"config", "rollouts"},  # adapter mode's LoraSync is a token sampler of the rollout seam
    "rollouts": {"config"},
    "evaluation": {
        "absolute_zero",
        "config",
        "data",
        "envs",
        "models",
        "remote",
        "rewards",
        "rollouts",
        "sandbox",
        "serving",
        "tools",  # an endpoint is sampled as `azr gen` plays it: tools' EndpointPolicy
    },
    "selfplay": {"data", "remote", "rewards"},
    "absolute_zero": {"config", "data", "rewards", "rollouts", "sandbox"},  # its draws are one-turn episodes
    "report": set(),  # reads run folders; imports no training code
    "audit": {"config", "data", "report", "rewards", "sandbox"},
    "tools": {"config", "data", "models", "remote", "rewards", "rollouts", "sandbox", "serving"},
    # the environments the episode runner plays (code task, tool loop) and `azr gen`'s collection over them
    "envs": {"config", "data", "models", "remote", "rewards", "rollouts", "sandbox", "serving", "tools"},
    "training": {
        "absolute_zero",
        "audit",
        "config",
        "data",
        "envs",
        "evaluation",
        "models",
        "rewards",
        "rollouts",
        "sandbox",
        "selfplay",
        "serving",
        "tools",
    },
    "cli": {
        "absolute_zero",
        "audit",
        "config",
        "data",
        "envs",
        "evaluation",
        "models",
        "remote",
        "report",
        "rewards",
        "sandbox",
        "selfplay",
        "serving",
        "tools",
        "training",
    },
}
# config's section types are the bottom layer (ARCHITECTURE.md): every package above data and sandbox may use them.
BELOW_CONFIG = {"errors", "logs", "prompts", "config", "data"}
for _unit_name, _allowed in ALLOWED.items():
    if _unit_name not in BELOW_CONFIG:
        _allowed.add("config")
# Never import torch, transformers, trl (or the rest of HEAVY) at module level: `azr --help`, the sandbox and
# `azr eval --samples` start in a fraction of a second.
LIGHT = {
    "alarms",
    "errors",
    "inputs",
    "logs",
    "secrets",
    "terminal",
    "prompts",
    "config",
    "data",
    "sandbox",
    "rewards",
    "remote",
    "serving",
    "tools",
    "envs",
    "cli",
    "absolute_zero",
    "report",
    "audit",
}


def _unit(path: Path) -> str:
    """The package (or shared module) a file belongs to: azr/rewards/grading.py -> 'rewards', azr/logs.py -> 'logs'."""
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE)


def _imports(path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == "azr":  # `from azr import x`: the units count
            names |= {f"azr.{a.name}" for a in node.names if a.name != "__version__"}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _id(path: Path) -> str:
    return str(path.relative_to(PACKAGE))


def test_the_table_names_every_package():
    units = {_unit(p) for p in MODULES}
    assert units == set(ALLOWED), units ^ set(ALLOWED)


@pytest.mark.parametrize("path", MODULES, ids=_id)
def test_imports_go_one_way(path):
    unit = _unit(path)
    used = {n.split(".")[1] for n in _imports(path, top_level_only=False) if n.startswith("azr.")}
    assert used - {unit} <= ALLOWED[unit] | SHARED - {unit}, used - {unit} - ALLOWED[unit] - SHARED
    assert "cli" not in used or unit == "cli"


@pytest.mark.parametrize("path", MODULES, ids=_id)
def test_other_packages_are_used_through_their_face(path):
    """Outside a package, `from azr.rewards import X`, never `from azr.rewards.grading import X`."""
    unit = _unit(path)
    deep = {
        n for n in _imports(path, top_level_only=False) if n.startswith("azr.") and n.count(".") >= 2
    }  # azr.<pkg>.<module>
    foreign = {n for n in deep if n.split(".")[1] != unit}
    assert not foreign, foreign


@pytest.mark.parametrize("path", [p for p in MODULES if _unit(p) in LIGHT], ids=_id)
def test_light_packages_do_not_import_heavy_packages_at_module_level(path):
    assert not {n.split(".")[0] for n in _imports(path, top_level_only=True)} & HEAVY


def test_no_parameter_is_typed_cfg_any():
    """Every package may take a typed section of config; `cfg: Any` hides a dependency the layering would show."""
    untyped = [
        f"{_id(path)}:{node.lineno} {node.arg}"
        for path in MODULES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.arg)
        and (node.arg == "cfg" or node.arg.endswith("_cfg") or node.arg == "config")
        and isinstance(node.annotation, ast.Name)
        and node.annotation.id == "Any"
    ]
    assert not untyped, untyped


def test_every_module_says_what_it_owns():
    missing = [_id(p) for p in PACKAGE.rglob("*.py") if not ast.get_docstring(ast.parse(p.read_text()))]
    assert not missing, missing


@pytest.mark.parametrize("path", sorted((PACKAGE / "sandbox").glob("*.py")), ids=lambda p: p.name)
def test_sandbox_knows_nothing_above_it(path):
    """The sandbox runs programs; it knows nothing of tests, rewards or the heavy stack (of config, only the section
    types its factory takes; of the shared leaves, the typed errors and the bounded reads its server parses bodies
    with)."""
    names = _imports(path, top_level_only=False)
    below = ("azr.sandbox", "azr.config", "azr.errors", "azr.inputs")
    assert all(not n.startswith("azr.") or n.startswith(below) for n in names), names
    assert not {n.split(".")[0] for n in names} & HEAVY


def test_the_worker_is_standard_library_only():
    """worker.py runs under the bare interpreter inside the sandbox (python -I -S): no azr, no site-packages."""
    names = {n.split(".")[0] for n in _imports(PACKAGE / "sandbox" / "worker.py", top_level_only=False)}
    assert names <= set(sys.stdlib_module_names), names - set(sys.stdlib_module_names)


def test_the_harness_runner_is_standard_library_only():
    """rewards/runner.py runs inside the sandbox too (preloaded by the worker, or compiled by a program)."""
    names = {n.split(".")[0] for n in _imports(PACKAGE / "rewards" / "runner.py", top_level_only=False)}
    assert names <= set(sys.stdlib_module_names), names - set(sys.stdlib_module_names)


@pytest.mark.parametrize("path", sorted((PACKAGE / "config").glob("*.py")), ids=lambda p: p.name)
def test_config_is_the_schema_and_its_checks(path):
    """config/ imports no trl, lazily or not: the translation of a recipe into TRL's classes (and TRL's own checks on
    `grpo:`) is azr.training's, run in its preflight before any model loads."""
    names = _imports(path, top_level_only=False)
    assert not {n for n in names if n.split(".")[0] in HEAVY}, names


def test_callers_are_typed_on_the_execution_provider_not_the_pool():
    """Outside sandbox/, nothing names `SandboxPool` in an annotation: callers take any `ExecutionProvider`."""
    named = [
        f"{_id(path)}:{node.lineno}"
        for path in MODULES
        if _unit(path) != "sandbox"
        for node in ast.walk(ast.parse(path.read_text()))
        for annotation in [getattr(node, "annotation", None), getattr(node, "returns", None)]
        if annotation is not None and "SandboxPool" in ast.unparse(annotation)
    ]
    assert not named, named


TRL_DOOR = PACKAGE / "training" / "trl"


@pytest.mark.parametrize("path", [p for p in MODULES if TRL_DOOR not in p.parents], ids=_id)
def test_no_trl_import_outside_trls_adapter(path):
    """TRL is known to training/trl/ alone (TRL's adapter), lazily or not, type annotations included: rollouts/ and
    every environment hand training/ data, the rest of training/ builds runs from the adapter's trainer and
    arguments, serving/ runs the server command the adapter passes in for TRL's server mode
    (`azr.training.trl.vllm`), and models/ writes its own response template. No exceptions."""
    uses = {n for n in _imports(path, top_level_only=False) if n == "trl" or n.startswith("trl.")}
    assert not uses, uses


def test_the_trl_rule_sees_a_lazy_import(tmp_path):
    """The rule above reads imports inside functions too, so a passing run means something."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from trl.generation.vllm_client import parse_logprobs\n    import trl.scripts\n")
    assert _imports(probe, top_level_only=False) == {"trl.generation.vllm_client", "trl.scripts"}


def test_no_parameter_is_typed_trainer_any():
    """A trainer is passed as its class or as a protocol of what is used of it (`azr.rollouts.BatchView`), never as
    `Any`: rollouts and environments get data from training, not a trainer to call back."""
    untyped = [
        f"{_id(path)}:{node.lineno} {node.arg}"
        for path in MODULES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.arg)
        and "trainer" in node.arg
        and (node.annotation is None or ast.unparse(node.annotation) in ("Any", "typing.Any"))
        and node.arg != "self"
    ]
    assert not untyped, untyped


# The encoding of tests as tagged strings (`\x00KIND:` and a JSON object) belongs to one module; every other one works
# on the typed `Test` values. These are the shapes that reading or writing the tags takes.
CODEC = PACKAGE / "data" / "codec.py"
_KINDS = ("assert", "stdio", "call", "pytest", "unittest")
_TAG_HELPERS = re.compile(
    r"\b(decode_case|decode_test|is_case|shown_test|with_options|test_prelude)\b|(?<![.\w])(?<!def )tagged\("
)


def _tag_uses(source: str, name: str) -> list[str]:
    """Where a module spells a tag (a string that starts with NUL and a kind), tests or builds one with a lone NUL
    (`.startswith`, `.partition`, an f-string), or calls one of the old tag helpers."""
    found = [f"{name}: {m.group(0)}" for m in _TAG_HELPERS.finditer(source)]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("\x00"):
            rest = node.value[1:]
            if rest.startswith(_KINDS) or (rest == "" and _in_fstring_or_call(node, source)):
                found.append(f"{name}:{node.lineno} {node.value[:12]!r}")
    return found


def _in_fstring_or_call(node: ast.Constant, source: str) -> bool:
    """A lone NUL string used where a tag is built or tested: in an f-string, or the argument of a str method."""
    line = source.splitlines()[node.lineno - 1]
    return any(word in line for word in ("startswith(", "partition(", "split(", 'f"\\x00', "f'\\x00"))


@pytest.mark.parametrize("path", [p for p in MODULES if p != CODEC], ids=_id)
def test_no_module_but_the_codec_reads_or_writes_test_tags(path):
    """Tests are typed values (`azr.data.Test`) everywhere but in `azr/data/codec.py`, the one encoding for dataset
    columns: adding a kind touches the union, its planner and its verdict rule, never a parser elsewhere."""
    assert not _tag_uses(path.read_text(), _id(path)), _tag_uses(path.read_text(), _id(path))


def test_the_tag_rule_sees_a_tag_reader():
    """The rule above catches the shapes it is meant to, so a passing run means something."""
    reader = 'S = "\\x00stdio:{}"\nok = "x".startswith("\\x00")\ny = decode_test(S)\nz = f"\\x00{k}:"\n'
    assert len(_tag_uses(reader, "probe")) == 4
    assert not _tag_uses('def tagged(self):\n    pass\nkey = "\\0" + code\n', "probe")
