"""Inputs for the audit: the call arguments and stdin inputs a task's tests already use, and new ones made from them
by type-aware edits of one argument (or one stdin token) at a time, as EvalPlus makes its inputs, kept in the domain
the tests show. Deterministic for a given task. Nothing here runs code: `azr.audit.strength` runs these through the
sandbox (docs/audit.md lists the edits).
"""

from __future__ import annotations

import ast
import itertools
import random
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from azr.data import AssertTest, StdioCase, Task
from azr.inputs import MAX_INT_DIGITS


@dataclass
class Call:
    """One call a test makes: the function's name and its literal arguments."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    wrap: str = ""  # list, tuple, sorted, set or frozenset around the call, as the test has it (a generator's values)

    def source(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        call = f"{self.name}({', '.join(parts)})"
        return f"{self.wrap}({call})" if self.wrap else call


def callables(task: Task) -> set[str]:
    """The names a test may call: the reference's top-level functions and classes, and the entry point."""
    names = {task.entry_point} if task.entry_point else set()
    try:
        tree = ast.parse(task.solution or "")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return names
    return names | {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def calls_in_tests(task: Task) -> list[Call]:
    """Every call of one of `callables(task)` with literal arguments in the task's (assert) tests, in order, without
    duplicates."""
    names = callables(task)
    found: list[Call] = []
    seen: set[str] = set()
    for test in task.tests:
        for call in _calls_in(test.source if isinstance(test, AssertTest) else "", names):
            key = call.source()
            if key not in seen and _literal_ok(key):
                seen.add(key)
                found.append(call)
    return found


def _calls_in(test: str, names: set[str]) -> Iterator[Call]:
    try:
        tree = ast.parse(test)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    aliases = _candidate_aliases(tree, names)
    wrapped = {  # inner call -> the container builtin around it
        id(node.args[0]): node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _WRAPS
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Call)
    }
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        name = aliases.get(node.func.id, node.func.id if node.func.id in names else None)
        if name is None or any(isinstance(a, ast.Starred) for a in node.args):
            continue
        try:
            args = tuple(ast.literal_eval(a) for a in node.args)
            kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if len(kwargs) == len(node.keywords):
            call = Call(name, args, kwargs, wrapped.get(id(node), ""))
            try:
                call.source()
            except (ValueError, RecursionError):  # an integer too long to print, a value nested too deep
                continue
            yield call


_WRAPS = ("list", "tuple", "sorted", "set", "frozenset")


def _candidate_aliases(tree: ast.Module, names: set[str]) -> dict[str, str]:
    """HumanEval's shape: `def check(candidate): assert candidate(...)` then `check(f)`: `candidate` stands for f."""
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and len(n.args.args) == 1}
    aliases = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in defs
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in names
        ):
            aliases[defs[node.func.id].args.args[0].arg] = node.args[0].id
    return aliases


def _literal_ok(source: str) -> bool:
    """Whether the call's source reads back as the same literals (no inf, nan or object reprs)."""
    try:
        call = _unwrapped(ast.parse(source, mode="eval").body)
        assert isinstance(call, ast.Call)
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            ast.literal_eval(arg)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, AssertionError):
        return False
    return True


def compares_values(task: Task) -> bool:
    """Whether a test compares a call's value with a literal (`assert f(x) == 3`), so that an exact expected value
    is what the tests mean; tests that only check properties of the value (any valid answer is accepted) are not."""
    names = callables(task)
    for test in task.tests:
        if not isinstance(test, AssertTest):
            continue
        try:
            tree = ast.parse(test.source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        names_here = names | set(_candidate_aliases(tree, names))
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
                sides = (node.left, node.comparators[0])
                for call, other in (sides, sides[::-1]):
                    inner = _unwrapped(call)
                    if (
                        isinstance(inner, ast.Call)
                        and isinstance(inner.func, ast.Name)
                        and inner.func.id in names_here
                        and _is_literal(other)
                    ):
                        return True
    return False


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _unwrapped(node: ast.expr) -> ast.expr:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _WRAPS and node.args:
        return node.args[0]
    return node


def called_name(source: str) -> str:
    """The function a call input calls (inside its wrapper, if any)."""
    node = _unwrapped(ast.parse(source, mode="eval").body)
    return node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else ""


def inputs_in_tests(task: Task) -> list[str]:
    """The inputs the tests use: call expressions, or a stdin task's inputs."""
    if task.stdio:
        return [c.input for c in task.tests if isinstance(c, StdioCase)]
    return [c.source() for c in calls_in_tests(task)]


def generated_inputs(task: Task, limit: int) -> list[str]:
    """Up to `limit` new inputs made from the tests' own (none already among them), the same for a given task: edits
    of the tests' inputs, then edits of those (two rounds, as EvalPlus mutates its growing corpus)."""
    rng = random.Random(zlib.crc32(task.id.encode("utf-8")))
    known = set(inputs_in_tests(task))
    if task.stdio:
        first = [v for text in sorted(known) for v in _stdin_variants(text)]
        second = [v for text in first[:20] for v in _stdin_variants(text)]
    else:
        calls = calls_in_tests(task)
        domain = _Domain.of(calls)
        first_calls = [v for call in calls for v in _call_variants(call, domain, rng)]
        rng.shuffle(first_calls)
        second_calls = [v for call in first_calls[:20] for v in _call_variants(call, domain, rng)]
        first, second = [c.source() for c in first_calls], [c.source() for c in second_calls]
    found = []
    for round_ in (first, second):
        fresh = [c for c in dict.fromkeys(round_) if c not in known and (task.stdio or _literal_ok(c))]
        rng.shuffle(fresh)
        known |= set(fresh)
        found += fresh
    return found[:limit]


@dataclass
class _Domain:
    """What the tests' arguments show: whether any number is negative, the characters their strings use."""

    negatives: bool
    chars: str
    numbers: bool = True  # the tests pass numbers (new list items are numbers)
    strings: bool = True  # the tests pass strings (new list items may be strings)

    @classmethod
    def of(cls, calls: list[Call]) -> _Domain:
        values = [v for call in calls for v in (*call.args, *call.kwargs.values())]
        numbers = [x for v in values for x in _leaves(v) if isinstance(x, (int, float)) and not isinstance(x, bool)]
        chars = sorted({ch for v in values for x in _leaves(v) if isinstance(x, str) for ch in x})
        strings = any(isinstance(x, str) for v in values for x in _leaves(v))
        return cls(any(x < 0 for x in numbers), "".join(chars) or "ab", bool(numbers) or not strings, strings)


def _leaves(value: object) -> Iterator[Any]:
    if isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(k)
            yield from _leaves(v)
    else:
        yield value


def _call_variants(call: Call, domain: _Domain, rng: random.Random) -> Iterator[Call]:
    for i, arg in enumerate(call.args):
        for new in _variants(arg, domain, rng):
            yield Call(call.name, (*call.args[:i], new, *call.args[i + 1 :]), call.kwargs, call.wrap)
    for key, arg in call.kwargs.items():
        for new in _variants(arg, domain, rng):
            yield Call(call.name, call.args, {**call.kwargs, key: new}, call.wrap)


def _variants(value: object, domain: _Domain, rng: random.Random, depth: int = 0) -> list[Any]:
    """Type-aware edits of one value, each of the same type as the value."""
    if isinstance(value, bool) or value is None:
        return [not value] if isinstance(value, bool) else []
    if isinstance(value, int):
        found = [value + 1, value - 1, value * 2, 0, -value, value + rng.randint(2, 9)]
        return [x for x in found if (domain.negatives or x >= 0) and abs(x) <= max(abs(value) * 2, 10)]
    if isinstance(value, float):
        found = [value + 1.0, value - 1.0, value * 2, 0.0, -value, value / 2]
        return [x for x in found if domain.negatives or x >= 0]
    if isinstance(value, str):
        if not value:
            return [rng.choice(domain.chars)]
        i = rng.randrange(len(value))
        return [value[:-1], value + value[-1], value[::-1], value[:i] + rng.choice(domain.chars) + value[i + 1 :], ""]
    if isinstance(value, (list, tuple)):
        items = list(value)
        if not items:  # nothing to edit: small lists of the kinds tests use (a reference that refuses one drops it)
            seeds: list[list[Any]] = []
            if domain.numbers:
                seeds += [[1], [2, 1], [1, 2, 3], [3, 0, 2, 2]] + ([[-1, 2]] if domain.negatives else [])
            if domain.strings:
                seeds += [[rng.choice(domain.chars)], list(domain.chars[:3])]
            return [type(value)(x) for x in seeds]
        found: list[list[Any]] = [[], items[:-1], items[::-1], items + items[-1:]]
        shuffled = items[:]
        rng.shuffle(shuffled)
        found.append(shuffled)
        if items and depth < 2:
            i = rng.randrange(len(items))
            found += [[*items[:i], v, *items[i + 1 :]] for v in _variants(items[i], domain, rng, depth + 1)[:2]]
        return [type(value)(x) for x in found]
    if isinstance(value, dict) and value:
        first = next(iter(value))
        return [{k: v for k, v in value.items() if k != first}, {}]
    return []


_INT = re.compile(r"(?<![\w.])-?\d+(?![\w.])")
_WORD = re.compile(r"(?<!\S)[^\s\d]+(?!\S)")  # a whitespace-separated token without digits: "WBWB", "(()", "abc"


def _stdin_variants(text: str) -> Iterator[str]:
    """The input with one token changed, integer and word edits taken in turn: an integer by one (a non-negative
    token stays non-negative); a word (a token without digits) with one character replaced by the next of the
    characters the input's words use (first, middle or last), two neighbours swapped, or reversed. Word edits keep
    the word's length and alphabet, so counts elsewhere in the input still hold."""
    numbers = [v for m in list(_INT.finditer(text))[:50] for v in _int_variants(text, m)]
    words = list(_WORD.finditer(text))[:50]
    alphabet = sorted({ch for m in words for ch in m.group()})
    edits = [v for m in words for v in _word_variants(text, m, alphabet)]
    for pair in itertools.zip_longest(numbers, edits):
        yield from (v for v in pair if v is not None)


def _int_variants(text: str, match: re.Match[str]) -> Iterator[str]:
    if len(match.group().lstrip("-")) > MAX_INT_DIGITS:  # past what Python converts: a token left as it is
        return
    value = int(match.group())
    for new in (value + 1, value - 1):
        if value >= 0 > new:
            continue
        yield text[: match.start()] + str(new) + text[match.end() :]


def _word_variants(text: str, match: re.Match[str], alphabet: list[str]) -> Iterator[str]:
    word = match.group()
    found = []
    for i in dict.fromkeys((0, len(word) // 2, len(word) - 1)):
        other = alphabet[(alphabet.index(word[i]) + 1) % len(alphabet)]
        found.append(word[:i] + other + word[i + 1 :])
    if len(word) > 1:
        i = max(0, len(word) // 2 - 1)
        found += [word[:i] + word[i + 1] + word[i] + word[i + 2 :], word[::-1]]
    for new in dict.fromkeys(found):
        if new != word:
            yield text[: match.start()] + new + text[match.end() :]
