"""Mutants for the audit: tree edits of a reference, each one compiling program a line or two away from it."""

from __future__ import annotations

import difflib

from azr.audit import mutants

SOURCE = '''def clamp_sum(xs, limit):
    """Sum the positives, at most limit."""
    total = 0
    for x in xs:
        if x > 0 and total + x <= limit:
            total += x
    return min(total, limit)


def middle(s, start):
    return s[start:-1] if not s.startswith("a") else s[::-1]


def span(a, b):
    return [i for i in range(a, b)] + [a - b]
'''


def _changed(variant: str) -> list[str]:
    diff = difflib.unified_diff(SOURCE.splitlines(), variant.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("---", "+++")]


def test_every_mutant_compiles_differs_and_changes_one_line():
    found = mutants(SOURCE)
    assert len({m.source for m in found}) == len(found) and SOURCE not in {m.source for m in found}
    for m in found:
        compile(m.source, "<mutant>", "exec")
        changed = _changed(m.source)
        assert len(changed) == (1 if m.operator == "early return" else 2), (m.operator, changed)


def test_each_kind_of_edit_the_audit_promises_is_made():
    found = {m.operator: m for m in mutants(SOURCE)}
    assert {
        "comparison",
        "arithmetic",
        "boolean",
        "off by one",
        "range bound",
        "swapped arguments",
        "swapped operands",
        "dropped branch",
        "negated condition",
        "early return",
        "slice",
        "swapped name",
        "removed unary",
        "swapped method",
        "constant",
    } <= set(found)
    sources = {m.source for m in mutants(SOURCE)}
    assert SOURCE.replace("x > 0 and", "x >= 0 and") in sources
    assert SOURCE.replace("range(a, b)", "range(a, b + 1)") in sources
    assert SOURCE.replace("min(total, limit)", "min(limit, total)") in sources
    assert SOURCE.replace("s[start:-1]", "s[:-1]") in sources
    assert SOURCE.replace("    total = 0\n", "    total = 0\n    return min(total, limit)\n") in sources


def test_docstrings_and_fstrings_are_left_alone():
    source = 'def f(x):\n    """Doc."""\n    return f"{x}!"\n'
    assert all('"""Doc."""' in m.source and 'f"{x}!"' in m.source for m in mutants(source))


def test_the_cap_is_deterministic_and_keeps_every_kind():
    everything = mutants(SOURCE)
    capped = mutants(SOURCE, 12)
    assert capped == mutants(SOURCE, 12) and len(capped) == 12
    assert len({m.operator for m in capped}) == min(12, len({m.operator for m in everything}))


def test_source_that_does_not_parse_has_no_mutants():
    assert mutants("def f(:\n") == []
