"""Probes: programs that must fail every task whose tests check anything (`defines nothing`, `exits 0 at import`,
`returns None`, `returns the empty value`, and for stdin tasks `prints another case's output`); one that passes
shows a test that checks nothing. Nothing here runs code.
"""

from __future__ import annotations

import collections

from azr.audit.cases import callables
from azr.data import StdioCase, Task

_EMPTY = {bool: "False", int: "0", float: "0.0", str: "''", list: "[]", tuple: "()", dict: "{}", set: "set()"}


def static_probes(task: Task) -> dict[str, str]:
    """Probe name -> program, for the probes that need nothing but the task."""
    probes = {"defines nothing": "pass\n", "exits 0 at import": "import sys\nsys.exit(0)\n"}
    if task.stdio:
        outputs = [c.output for c in task.tests if isinstance(c, StdioCase)]
        if len(outputs) > 1:
            common = collections.Counter(outputs).most_common(1)[0][0]
            probes["prints another case's output"] = f"import sys\nsys.stdout.write({common!r})\n"
        return probes
    names = sorted(callables(task))
    if names:
        probes["returns None"] = "".join(_stub(name, "None") for name in names)
    return probes


def empty_value_probe(task: Task, name: str, value: object) -> str | None:
    """`returns the empty value`: `name` returns the empty value of `value`'s type (the others None); None when the
    type has no empty value or it is None itself."""
    empty = _EMPTY.get(type(value))
    if empty is None or task.stdio:
        return None
    return "".join(_stub(n, empty if n == name else "None") for n in sorted(callables(task) | {name}))


def _stub(name: str, value: str) -> str:
    # a class under test: any method returns the value too
    return (
        f"def {name}(*args, **kwargs):\n    return {value}\n"
        if not name[:1].isupper()
        else f"class {name}:\n    def __init__(self, *a, **k):\n        pass\n"
        f"    def __getattr__(self, _):\n        return lambda *a, **k: {value}\n"
    )
