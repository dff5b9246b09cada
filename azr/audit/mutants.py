"""Mutants: programs one small edit away from a reference solution, over one table of operator swaps (`SWAPS`):
`candidates` swaps single tokens (the SFT warm start's near misses), `mutants` edits the syntax tree for
`azr data audit`, each edit replacing only its own span so a mutant's diff is one or two lines. Written here, not
taken from a mutation-testing library (docs/audit.md says why). Nothing here runs code.
"""

from __future__ import annotations

import ast
import builtins
import copy as copy_module
import io
import random
import tokenize
import warnings
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

# Each token and what it may become: comparisons loosened or tightened, arithmetic flipped, the usual swapped pairs.
SWAPS: dict[str, tuple[str, ...]] = {
    "<": ("<=",),
    "<=": ("<",),
    ">": (">=",),
    ">=": (">",),
    "==": ("!=",),
    "!=": ("==",),
    "+": ("-",),
    "-": ("+",),
    "+=": ("-=",),
    "-=": ("+=",),
    "//": ("%",),
    "%": ("//",),
    "True": ("False",),
    "False": ("True",),
    "and": ("or",),
    "or": ("and",),
    "min": ("max",),
    "max": ("min",),
}
# Method names swapped only where they follow a dot (elsewhere they may be the solution's own variables).
METHOD_SWAPS: dict[str, tuple[str, ...]] = {
    "upper": ("lower",),
    "lower": ("upper",),
    "startswith": ("endswith",),
    "endswith": ("startswith",),
    "isdigit": ("isalpha",),
    "isalpha": ("isdigit",),
}


def candidates(source: str) -> list[str]:
    """Every single-token variant of `source` that still compiles, in source order, without duplicates."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    lines = io.StringIO(source).readlines()  # the lines tokenize saw (str.splitlines also breaks at \f, \u2028, ...)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    seen: set[str] = set()
    out: list[str] = []
    previous = ""
    for tok in tokens:
        after_dot, previous = previous == ".", tok.string
        if tok.type not in (tokenize.OP, tokenize.NAME, tokenize.NUMBER):
            continue
        begin = starts[tok.start[0] - 1] + tok.start[1]
        end = starts[tok.end[0] - 1] + tok.end[1]
        for new in _replacements(tok, after_dot):
            variant = source[:begin] + new + source[end:]
            if variant not in seen and _compiles(variant):
                seen.add(variant)
                out.append(variant)
    return out


def _replacements(tok: tokenize.TokenInfo, after_dot: bool) -> tuple[str, ...]:
    if tok.type == tokenize.NUMBER:
        if not tok.string.isdigit():
            return ()
        value = int(tok.string)
        return (str(value + 1),) + ((str(value - 1),) if value > 0 else ())
    return (METHOD_SWAPS if after_dot else SWAPS).get(tok.string, ())


def _compiles(source: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. "'tuple' object is not callable": such a variant simply fails
        try:
            compile(source, "<near-miss>", "exec")
        except (SyntaxError, ValueError):
            return False
    return True


def sample_candidates(source: str, rng: random.Random, limit: int) -> list[str]:
    """Up to `limit` candidates in a random order drawn from `rng` (the caller grades them and keeps the failures)."""
    found = candidates(source)
    rng.shuffle(found)
    return found[:limit]


# The tree's operator classes by their token, so the tree edits read the same swaps as the token edits.
_AST_OPS: dict[str, type] = {
    "<": ast.Lt,
    "<=": ast.LtE,
    ">": ast.Gt,
    ">=": ast.GtE,
    "==": ast.Eq,
    "!=": ast.NotEq,
    "+": ast.Add,
    "-": ast.Sub,
    "//": ast.FloorDiv,
    "%": ast.Mod,
    "and": ast.And,
    "or": ast.Or,
}
_TOKEN_OF = {cls: token for token, cls in _AST_OPS.items()}
# Tree-only swaps (no single token to swap, or a token the near misses leave alone).
_MORE_OPS: dict[type, tuple[type, ...]] = {
    ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,),
    ast.Is: (ast.IsNot,),
    ast.IsNot: (ast.Is,),
    ast.Mult: (ast.Add, ast.FloorDiv),
    ast.Div: (ast.FloorDiv, ast.Mult),
    ast.FloorDiv: (ast.Div,),
    ast.Pow: (ast.Mult,),
    ast.BitAnd: (ast.BitOr,),
    ast.BitOr: (ast.BitAnd,),
    ast.LShift: (ast.RShift,),
    ast.RShift: (ast.LShift,),
}
_NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)


@dataclass(frozen=True)
class Mutant:
    """One edit of a reference solution: the operator that made it and the whole edited program."""

    operator: str
    source: str


def _swaps(op: ast.AST) -> list[type]:
    found = [_AST_OPS[t] for t in SWAPS.get(_TOKEN_OF.get(type(op), ""), ()) if t in _AST_OPS]
    return found + [c for c in _MORE_OPS.get(type(op), ()) if c not in found]


def _edits(tree: ast.Module) -> Iterator[tuple[str, ast.AST, str]]:
    """(operator, node, replacement source) for every expression-level edit of the tree."""
    docstrings = {
        id(body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        for body in [node.body]
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    }
    in_fstring = {id(n) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for n in ast.walk(node)}

    def changed(node: ast.AST, **fields) -> str:
        copy = copy_module.deepcopy(node)
        for name, value in fields.items():
            setattr(copy, name, value)
        return ast.unparse(copy)

    for node in ast.walk(tree):
        if id(node) in in_fstring:
            continue
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            for new in _swaps(node.ops[0]):
                yield "comparison", node, changed(node, ops=[new()])
            if isinstance(node.ops[0], (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
                yield "swapped operands", node, changed(node, left=node.comparators[0], comparators=[node.left])
        elif isinstance(node, ast.BinOp):
            for new in _swaps(node.op):
                yield "arithmetic", node, changed(node, op=new())
            if isinstance(node.op, _NON_COMMUTATIVE):
                yield "swapped operands", node, changed(node, left=node.right, right=node.left)
        elif isinstance(node, ast.BoolOp):
            for new in _swaps(node.op):
                yield "boolean", node, changed(node, op=new())
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
            yield "removed unary", node, ast.unparse(node.operand)
        elif isinstance(node, ast.Constant) and id(node) not in docstrings:
            yield from _constant_edits(node)
        elif isinstance(node, ast.Name) and node.id in ("min", "max", "any", "all"):
            other = {"min": "max", "max": "min", "any": "all", "all": "any"}.get(node.id)
            if other:
                yield "swapped name", node, other
        elif isinstance(node, ast.Call):
            yield from _call_edits(node)
        elif isinstance(node, ast.Slice):
            for part in ("lower", "upper", "step"):
                if getattr(node, part) is not None:
                    yield "slice", node, changed(node, **{part: None})
        elif isinstance(node, (ast.If, ast.IfExp, ast.While)) and not isinstance(node.test, ast.Constant):
            name = "dropped branch" if not isinstance(node, ast.While) else "dropped loop"
            yield name, node.test, "False"
            if isinstance(node, (ast.If, ast.IfExp)):
                yield "negated condition", node.test, f"not ({ast.unparse(node.test)})"


def _constant_edits(node: ast.Constant) -> Iterator[tuple[str, ast.AST, str]]:
    value = node.value
    if isinstance(value, bool):
        yield "constant", node, repr(not value)
    elif isinstance(value, int):
        yield "off by one", node, repr(value + 1)
        yield "off by one", node, repr(value - 1)
        if value not in (0, 1):
            yield "constant", node, "0"
    elif isinstance(value, float):
        yield "constant", node, repr(value + 1.0)
        yield "constant", node, repr(value / 2)
    elif isinstance(value, str) and value:
        yield "constant", node, repr("")
        if len(value) > 1:
            yield "constant", node, repr(value[:-1])


def _call_edits(node: ast.Call) -> Iterator[tuple[str, ast.AST, str]]:
    args = node.args
    if any(isinstance(a, ast.Starred) for a in args):
        return
    if isinstance(node.func, ast.Name) and node.func.id == "range" and args:
        stop = len(args) >= 2
        bound = 1 if stop else 0
        for delta in (" + 1", " - 1"):
            edited = [_operand(a) if i == bound else ast.unparse(a) for i, a in enumerate(args)]
            edited[bound] += delta
            yield "range bound", node, f"range({', '.join(edited)})"
        if stop:
            rest = [ast.unparse(a) for a in args[1:]]
            yield "range bound", node, f"range({', '.join([f'{_operand(args[0])} + 1', *rest])})"
    elif isinstance(node.func, ast.Attribute) and node.func.attr in METHOD_SWAPS:
        copy = copy_module.deepcopy(node)
        copy.func.attr = METHOD_SWAPS[node.func.attr][0]
        yield "swapped method", node, ast.unparse(copy)
    if len(args) >= 2 and not (isinstance(node.func, ast.Name) and node.func.id == "range"):
        copy = copy_module.deepcopy(node)
        copy.args[0], copy.args[1] = copy.args[1], copy.args[0]
        if ast.unparse(copy.args[0]) != ast.unparse(copy.args[1]):
            yield "swapped arguments", node, ast.unparse(copy)


def _operand(node: ast.expr) -> str:
    """`node` as the left operand of `+ 1`: parenthesised unless it is a name, call, constant, attribute or item."""
    text = ast.unparse(node)
    atomic = (ast.Name, ast.Call, ast.Constant, ast.Attribute, ast.Subscript)
    return text if isinstance(node, atomic) else f"({text})"


def _early_returns(tree: ast.Module, lines: list[str]) -> Iterator[tuple[int, str]]:
    """(line index, line) to insert: a function's final `return X` moved before an earlier statement of its body,
    where every name X reads is already bound there (parameters, or names the statements before assign)."""
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or len(fn.body) < 2:
            continue
        last = fn.body[-1]
        if not isinstance(last, ast.Return) or last.value is None:
            continue
        needed = {n.id for n in ast.walk(last.value) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        bound = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
        bound |= {a.arg for a in (fn.args.vararg, fn.args.kwarg) if a is not None}
        bound |= set(dir(builtins))
        for stmt in fn.body[:-1]:
            line = lines[stmt.lineno - 1]
            indent = line[: len(line) - len(line.lstrip())]
            first = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)  # the docstring
            if not first and needed <= bound and len(indent) == stmt.col_offset:
                yield stmt.lineno - 1, f"{indent}return {ast.unparse(last.value)}\n"
            bound |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def mutants(source: str, limit: int | None = None, given_lines: int = 0) -> list[Mutant]:
    """The tree edits of `source` that still compile and change it, without duplicates. With `limit`, at most that
    many, drawn in turn from each operator (a fixed order for a given source: the same every run). The first
    `given_lines` lines are the task's, not the solution's (HumanEval's prompt and its helpers): never edited."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    lines = io.StringIO(source).readlines()
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line.encode("utf-8")))
    raw = source.encode("utf-8")  # ast offsets count UTF-8 bytes
    seen = {source}
    found: list[Mutant] = []

    def keep(operator: str, variant: str) -> None:
        if variant not in seen and _compiles(variant):
            seen.add(variant)
            found.append(Mutant(operator, variant))

    for operator, node, new in _edits(tree):
        if getattr(node, "end_lineno", None) is None or node.lineno <= given_lines:
            continue
        begin = starts[node.lineno - 1] + node.col_offset
        end = starts[node.end_lineno - 1] + node.end_col_offset
        text = new if "\n" not in raw[begin:end].decode("utf-8", "replace") else None
        if text is None or len(text) > 2000:
            continue
        if isinstance(node, (ast.BinOp, ast.BoolOp, ast.Compare, ast.IfExp)) or " " in text:
            text = f"({text})" if _needs_parens(raw, begin, end) else text
        keep(operator, (raw[:begin] + text.encode("utf-8") + raw[end:]).decode("utf-8"))
    for index, line in _early_returns(tree, lines):
        if index < given_lines:
            continue
        keep("early return", "".join([*lines[:index], line, *lines[index:]]))
    if limit is None or len(found) <= limit:
        return found
    return _spread(found, limit, zlib.crc32(source.encode("utf-8")))


def _needs_parens(raw: bytes, begin: int, end: int) -> bool:
    """Whether an edited expression must be parenthesised to keep its place: not when it already stands alone
    between brackets, commas or at a statement's edge (kept minimal, so diffs stay readable)."""
    before = raw[:begin].rstrip()[-1:]
    after = raw[end:].lstrip(b" \t")[:1]
    alone_before = before in (b"(", b"[", b",", b"=", b":", b"") or before.isalpha()  # a keyword: if, return, and
    alone_after = after in (b")", b"]", b",", b":", b"", b"\n", b"#", b";") or after.isalpha()
    return not (alone_before and alone_after)


def _spread(found: list[Mutant], limit: int, seed: int) -> list[Mutant]:
    """`limit` mutants taken in turn from each operator's list (each list in a seeded order), so a cap keeps every
    kind of edit rather than the first lines' edits."""
    by_operator: dict[str, list[Mutant]] = {}
    for mutant in found:
        by_operator.setdefault(mutant.operator, []).append(mutant)
    rng = random.Random(seed)
    for group in by_operator.values():
        rng.shuffle(group)
    chosen: list[Mutant] = []
    while len(chosen) < limit:
        for group in by_operator.values():
            if group and len(chosen) < limit:
                chosen.append(group.pop(0))
    return chosen
