"""Absolute Zero's static rules on a program's syntax tree, as run inside the sandbox (shipped with `harness`;
standard library only): one top-level `f`, imports from an allow-list, no I/O, eval or introspection builtins
where the name reaches the builtin (CPython's `symtable` says where it resolves). A policy for well-formed tasks,
not the security boundary: the sandbox is (docs/absolute-zero.md, "Banned names, by scope").
"""

import ast
import symtable

IMPORTERS = frozenset({"__import__", "importlib"})
# Builtins for I/O, dynamic code and reflection, and the names through which the module's globals are reached.
# The two name lists are not laid out one name per line (formatting off), which would double this module.
# fmt: off
BANNED_NAMES = frozenset({
    "open", "input", "print", "eval", "exec", "compile", "globals", "locals", "vars", "getattr", "setattr",
    "delattr", "breakpoint", "exit", "quit", "help", "memoryview", "__builtins__", "__loader__", "__spec__",
    "__file__",
})
# Attributes that reach interpreter internals (and from there any module): never part of a code-reasoning task.
INTROSPECTION = frozenset({
    "__class__", "__bases__", "__base__", "__mro__", "__subclasses__", "__globals__", "__builtins__", "__code__",
    "__closure__", "__dict__", "__getattribute__", "__reduce__", "__reduce_ex__", "__import__", "__loader__",
    "__spec__", "__self__", "__func__", "__module__", "__traceback__", "gi_frame", "gi_code", "cr_frame", "ag_frame",
    "f_globals", "f_locals", "f_builtins", "f_back", "tb_frame",
})
# fmt: on
# Banned wherever they appear, even as a function's own local: the names through which the module's state is reached.
ALWAYS_BANNED = frozenset(name for name in BANNED_NAMES if name.startswith("__"))


def builtin_uses(source):
    """The banned names some scope of the program reads where they can reach the builtin (or the module's
    globals): anywhere but a function's own local, parameter or closed-over variable. SyntaxError where the
    compiler's scope analysis refuses the program."""
    top = symtable.symtable(source, "<program>", "exec")
    found, tables = set(), [top]
    while tables:
        table = tables.pop()
        function = table.get_type() == "function"  # functions, lambdas and comprehensions
        for symbol in table.get_symbols():
            name = symbol.get_name()
            if name not in BANNED_NAMES or not symbol.is_referenced():
                continue
            # A free variable is a cell of an enclosing function: never a builtin, even when unbound.
            if symbol.is_free() or (function and symbol.is_local() and not symbol.is_global()):
                continue
            found.add(name)
        tables.extend(table.get_children())
    return found


def static_problem(source, allowed_imports, entry="f"):
    """(reason, detail) for the first rule `source` breaks, or None: syntax, structure, banned_import, banned_name."""
    try:
        tree = ast.parse(source)
        reaching = builtin_uses(source)
    except (SyntaxError, ValueError) as exc:
        return "syntax", f"{type(exc).__name__}: {exc}"[:200]
    except (RecursionError, MemoryError):
        return "syntax", "nested too deeply to parse"
    functions = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            functions.append(node.name)
        elif isinstance(node, (ast.ClassDef, ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign)):
            continue
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            name = type(node).__name__
            return "structure", f"a top-level {name} statement; only imports, constants, classes and f"
    if functions != [entry]:
        return "structure", f"expected one top-level function named {entry}, found {functions or 'none'}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in allowed_imports:
                    return "banned_import", f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom):
            if node.level or (node.module or "").split(".")[0] not in allowed_imports:
                return "banned_import", f"from {'.' * node.level}{node.module or ''} import ..."
        elif isinstance(node, ast.Name) and node.id in IMPORTERS:
            return "banned_import", node.id
        elif isinstance(node, ast.Name) and (node.id in ALWAYS_BANNED or node.id in reaching):
            return "banned_name", node.id
        elif isinstance(node, ast.Attribute) and node.attr in INTROSPECTION:
            return "banned_name", f".{node.attr}"
    return None
