"""What a module test's twin may vouch for: the static half of judging module tests without trusting the program.

Each module test also runs in a *twin*, a process that never loaded the solution (its names are stand-ins there,
`runner._Taint`), and the twin's values replace the program's word where the program cannot have changed them. This
module decides, from the test module's syntax alone, where that can hold: a side of `A == B` is *pure* when
everything it reads is built from literals, pure builtins and names bound only to such expressions (no I/O, no clock,
no randomness, no object of the program's: nothing that could differ between the twin and the program's run); a
check site is *countable* when it runs once per call of its test (directly in the test's body, or in `for` loops
over pure iterables, in a test without `return`, `break` or `continue`), so the twin knows how often it must run.
The runner then checks at run time that no name a pure side reads was handed to the solution (SPEC_FUNCTIONS.md
section 5).
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field

# fmt: off
PURE_CALLS = frozenset((
    "abs", "all", "any", "ascii", "bin", "bool", "bytes", "chr", "complex", "dict", "divmod", "enumerate",
    "filter", "float", "format", "frozenset", "hex", "int", "len", "list", "map", "max", "min", "oct", "ord",
    "pow", "range", "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum", "tuple", "zip",
))
# methods that only read their receiver (or build a new value) ...
_READ_METHODS = frozenset((
    "capitalize", "casefold", "center", "copy", "count", "endswith", "expandtabs", "find", "fromkeys", "get",
    "index", "isalnum", "isalpha", "isdecimal", "isdigit", "islower", "isnumeric", "isspace", "istitle", "isupper",
    "items", "join", "keys", "ljust", "lower", "lstrip", "partition", "removeprefix", "removesuffix", "replace",
    "rfind", "rindex", "rjust", "rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip",
    "swapcase", "title", "upper", "values", "zfill",
))
# ... and methods of lists, dicts and sets that change their receiver only with their arguments
_MUTATORS = frozenset((
    "add", "append", "clear", "difference_update", "discard", "extend", "insert", "intersection_update", "pop",
    "popitem", "remove", "reverse", "setdefault", "sort", "symmetric_difference_update", "update",
))
_SHOWS = frozenset(("print", "isinstance", "issubclass", "type", "id", "hash", "callable", "hasattr"))
_PURE_NODES = (  # what a pure expression is made of (calls and attributes checked further)
    ast.Constant, ast.Name, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare,
    ast.IfExp, ast.Subscript, ast.Slice, ast.Starred, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
    ast.comprehension, ast.JoinedStr, ast.FormattedValue, ast.keyword, ast.Call, ast.Attribute, ast.operator,
    ast.unaryop, ast.boolop, ast.cmpop, ast.expr_context,
)
# fmt: on
_BUILTINS = frozenset(dir(builtins))
_IMPURE = None  # a name bound to something the twin cannot vouch for


@dataclass
class Scope:
    """The bindings of one function (or of the module): name -> the names its values were computed from, or
    `_IMPURE`; parameters are vouched for at run time (a fixture or parameter the solution made is caught there)."""

    deps: dict[str, set[str] | None] = field(default_factory=dict)
    params: frozenset[str] = frozenset()
    outer: Scope | None = None
    exits: bool = False  # a `return`, `break`, `continue` or `yield`: how often a site runs is not the twin's to say

    def closure(self, names: set[str]) -> frozenset[str] | None:
        """Every name `names` were computed from, through this scope's bindings and the module's; None when one
        is impure."""
        todo, seen = list(names), set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            scope = self
            while scope is not None and name not in scope.deps and name not in scope.params:
                scope = scope.outer
            if scope is None:
                if name not in _BUILTINS:
                    return None  # the solution's (or nobody's) name
                continue
            found = scope.deps.get(name, set())  # a parameter rebound or handed on is no longer only a parameter
            if found is _IMPURE:
                return None
            todo.extend(found)
        return frozenset(n for n in seen if n not in _BUILTINS or self.bound(n))

    def bound(self, name: str) -> bool:
        scope = self
        while scope is not None:
            if name in scope.deps or name in scope.params:
                return True
            scope = scope.outer
        return False


def pure_names(node: ast.expr, scope: Scope) -> frozenset[str] | None:
    """The names a pure expression depends on (its closure), or None when it is not pure."""
    read = _pure_reads(node, scope)
    return None if read is None else scope.closure(read)


def _pure_reads(node: ast.expr, scope: Scope) -> set[str] | None:
    local = set()  # comprehension variables: bound by their own (checked) iterables
    for sub in ast.walk(node):
        if not isinstance(sub, _PURE_NODES):
            return None
        if isinstance(sub, ast.comprehension):
            if sub.is_async:
                return None
            local |= {n.id for n in ast.walk(sub.target) if isinstance(n, ast.Name)}
        elif isinstance(sub, ast.Call) and not _pure_call(sub, scope):
            return None
        elif isinstance(sub, ast.Attribute) and not _called(sub, node):
            return None  # an attribute read (`obj.x`) could be anything's
    calls = {id(s.func) for s in ast.walk(node) if isinstance(s, ast.Call) and isinstance(s.func, ast.Name)}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id not in local and id(n) not in calls}


def _called(attribute: ast.Attribute, root: ast.expr) -> bool:
    return any(isinstance(s, ast.Call) and s.func is attribute for s in ast.walk(root))


def _pure_call(call: ast.Call, scope: Scope) -> bool:
    if isinstance(call.func, ast.Name):
        return call.func.id in PURE_CALLS and not scope.bound(call.func.id)
    return isinstance(call.func, ast.Attribute) and call.func.attr in _READ_METHODS


def function_scope(fn: ast.FunctionDef | ast.AsyncFunctionDef, outer: Scope, method: bool) -> Scope:
    """A test function's bindings. Its parameters are pure only where a `parametrize` with a pure list of values
    gives them (a fixture's value, `tmp_path` say, may differ between the twin and the program's run); `self` never
    is (what `setUp` stored there was made where the twin cannot see). A module-level name the function changes
    (`global`, `X.append(...)`, `X[k] = ...`, handed to a call) is impure for the whole module."""
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs, fn.args.vararg, fn.args.kwarg]
    names = [a.arg for a in args if a is not None][1 if method else 0 :]
    given = _parametrized(fn, outer)
    scope = Scope(params=frozenset(n for n in names if n in given), outer=outer)
    for name in names:
        if name not in given:
            scope.deps[name] = _IMPURE
    if method:
        scope.deps["self"] = _IMPURE
    _bind_block(fn.body, scope, frozenset(), False)
    scope.exits = any(isinstance(n, (ast.Return, ast.Break, ast.Continue, ast.Yield, ast.YieldFrom)) for n in _own(fn))
    assigned = {n.id for n in _own(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} | set(names)
    assigned -= {name for n in _own(fn) if isinstance(n, ast.Global) for name in n.names}
    for name in scope.deps:
        if name not in assigned and name in outer.deps:
            outer.deps[name] = _IMPURE
    return scope


def _parametrized(fn: ast.FunctionDef | ast.AsyncFunctionDef, module: Scope) -> set[str]:
    """The argument names `@pytest.mark.parametrize(NAMES, VALUES)` decorators give, where VALUES is pure."""
    given: set[str] = set()
    for deco in fn.decorator_list:
        if not (
            isinstance(deco, ast.Call) and getattr(deco.func, "attr", getattr(deco.func, "id", "")) == "parametrize"
        ):
            continue
        found = {k.arg: k.value for k in deco.keywords}
        names = deco.args[0] if deco.args else found.get("argnames")
        values = deco.args[1] if len(deco.args) > 1 else found.get("argvalues")
        if values is None or names is None or pure_names(values, module) is None:
            continue
        try:
            literal = ast.literal_eval(names)
        except (ValueError, TypeError, SyntaxError):
            continue
        parts = literal.split(",") if isinstance(literal, str) else literal
        given |= {str(p).strip() for p in parts}
    return given


def module_scope(tree: ast.Module) -> Scope:
    scope = Scope()
    _bind_block(tree.body, scope, frozenset(), False)
    return scope


def _own(fn: ast.AST):
    """The nodes of a function's body, not those of functions or classes nested in it."""
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


def _bind(scope: Scope, name: str, reads: set[str] | None) -> None:
    if reads is None or scope.deps.get(name, set()) is _IMPURE:
        scope.deps[name] = _IMPURE
    else:
        scope.deps.setdefault(name, set()).update(reads)


def _reads(node: ast.expr | None, scope: Scope) -> set[str] | None:
    return set() if node is None else _pure_reads(node, scope)


def _union(*parts: set[str] | frozenset[str] | None) -> set[str] | None:
    return None if any(p is None for p in parts) else set().union(*parts)  # type: ignore[arg-type]


def _bind_target(target: ast.expr, reads: set[str] | None, scope: Scope) -> None:
    if isinstance(target, ast.Name):
        _bind(scope, target.id, reads)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            _bind_target(element, reads, scope)
    elif isinstance(target, ast.Starred):
        _bind_target(target.value, reads, scope)
    elif isinstance(target, ast.Subscript) and isinstance(_root(target), ast.Name):
        _bind(scope, _root(target).id, _union(reads, _reads(target.slice, scope)))
    elif isinstance(target, ast.Attribute) and isinstance(_root(target), ast.Name):
        _bind(scope, _root(target).id, None)


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _bind_block(body: list[ast.stmt], scope: Scope, ctl: frozenset[str], fragile: bool) -> None:
    """Record what each statement binds; `ctl`: the names the enclosing `if`s and `for`s read; `fragile`: inside a
    `try`, `with`, `while` or `match`, where which bindings happen depends on what raised (the solution's doing)."""
    for stmt in body:
        _escapes(stmt, scope, ctl, fragile)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            _bind(scope, stmt.name, None)
            continue
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                _bind(scope, (alias.asname or alias.name).split(".")[0], None)
            continue
        if isinstance(stmt, (ast.Global, ast.Nonlocal)):
            for name in stmt.names:
                _bind(scope, name, None)
            continue
        reads: set[str] | None = None
        if isinstance(stmt, ast.Assign):
            reads = _union(_reads(stmt.value, scope), ctl)
            for target in stmt.targets:
                _bind_target(target, None if fragile else reads, scope)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            _bind_target(stmt.target, None if fragile else _union(_reads(stmt.value, scope), ctl), scope)
        elif isinstance(stmt, ast.AugAssign):
            own = {_root(stmt.target).id} if isinstance(_root(stmt.target), ast.Name) else set()
            _bind_target(stmt.target, None if fragile else _union(_reads(stmt.value, scope), ctl, own), scope)
        elif isinstance(stmt, ast.For):
            reads = _reads(stmt.iter, scope)
            _bind_target(stmt.target, None if fragile else _union(reads, ctl), scope)
            inner = ctl | (reads or set())
            _bind_block(stmt.body + stmt.orelse, scope, frozenset(inner), fragile or reads is None)
        elif isinstance(stmt, ast.If):
            reads = _reads(stmt.test, scope)
            _bind_block(stmt.body + stmt.orelse, scope, frozenset(ctl | (reads or set())), fragile or reads is None)
        elif isinstance(stmt, (ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match)) or (
            type(stmt).__name__ == "TryStar"
        ):
            for node in ast.walk(stmt):  # loop targets, `as` names, handlers' and patterns' names
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    _bind(scope, node.id, None)
                elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
                    _bind(scope, node.name, None)
            blocks = [getattr(stmt, k, None) or [] for k in ("body", "orelse", "finalbody")]
            blocks += [h.body for h in getattr(stmt, "handlers", [])] + [c.body for c in getattr(stmt, "cases", [])]
            for block in blocks:
                _bind_block(block, scope, ctl, True)
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                if isinstance(_root(target), ast.Name):
                    _bind(scope, _root(target).id, None)
        for node in ast.walk(stmt):  # walrus targets bind where the twin cannot follow
            if isinstance(node, ast.NamedExpr):
                _bind(scope, node.target.id, None)


def _reads_only(call: ast.Call, scope: Scope) -> bool:
    """Calls that compare or show their arguments and change none: `print`, `isinstance`, a test's own
    `self.assertEqual(...)` (the check itself; calls inside its arguments are looked at on their own)."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in _SHOWS and not scope.bound(func.id)
    owner = func.value if isinstance(func, ast.Attribute) else None
    return isinstance(owner, ast.Name) and owner.id == "self" and func.attr.startswith("assert")  # type: ignore[union-attr]


def _escapes(stmt: ast.stmt, scope: Scope, ctl: frozenset[str], fragile: bool) -> None:
    """A name handed to any call but a pure builtin or a read-only method may be changed by that call, and so may
    the object whose method is called; `x.append(v)`-style calls change `x` by their arguments only."""
    for node in ast.walk(stmt):
        if not isinstance(node, ast.Call) or _pure_call(node, scope) or _reads_only(node, scope):
            continue
        args = [*node.args, *(k.value for k in node.keywords)]
        root = _root(node.func.value) if isinstance(node.func, ast.Attribute) else None
        receiver = root.id if isinstance(root, ast.Name) else None
        if receiver and node.func.attr in _MUTATORS:  # type: ignore[union-attr]
            _bind(scope, receiver, None if fragile else _union(*(_reads(a, scope) for a in args), ctl))
            continue
        for arg in args:
            for name in ast.walk(arg):
                if isinstance(name, ast.Name):
                    _bind(scope, name.id, None)
        if receiver:
            _bind(scope, receiver, None)


def runs_computed_cases(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A `parametrize` whose values are not a literal: the test runs every case in one go, and how many there are is
    the twin's to say (the program's run computes them with a standard library the solution could have patched)."""
    for deco in fn.decorator_list:
        if isinstance(deco, ast.Call) and getattr(deco.func, "attr", getattr(deco.func, "id", "")) == "parametrize":
            values = deco.args[1] if len(deco.args) > 1 else {k.arg: k.value for k in deco.keywords}.get("argvalues")
            try:
                ast.literal_eval(values)  # type: ignore[arg-type]
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return True
    return False
