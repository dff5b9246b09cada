"""A bounded reader of pickles of plain data (LiveCodeBench's compressed test cases pickle a JSON string). Python's
unpickler trusts the sizes it reads (a memo index sizes an array; shared references expand once used); this one walks
the opcodes (`pickletools.genops`, which builds nothing) and builds only strings, bytes, numbers, None, booleans,
lists, tuples and dicts, every bound checked before the object is made: objects, the memo (a dict), integer digits,
nesting, and the size with shared references expanded. Globals and cycles are refused; nothing here runs code.
"""

from __future__ import annotations

import pickletools
from typing import Any

from azr.inputs import MAX_INT_DIGITS, env_limit

MAX_PICKLE_OBJECTS = ("AZR_MAX_PICKLE_OBJECTS", 1_000_000)
MAX_PICKLE_DEPTH = 100  # LiveCodeBench's cases nest three levels
_NODE = 32  # what one object counts in the expanded size, beside a string's or bytes' length

_SCALARS = {
    "NONE": lambda arg: None,
    "NEWTRUE": lambda arg: True,
    "NEWFALSE": lambda arg: False,
    **{name: lambda arg: arg for name in ("BININT", "BININT1", "BININT2", "LONG1", "LONG4", "BINFLOAT", "FLOAT")},
    **{name: lambda arg: arg for name in ("UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8")},
    **{name: lambda arg: arg for name in ("STRING", "BINSTRING", "SHORT_BINSTRING")},
    **{name: bytes for name in ("BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8")},
    "INT": lambda arg: arg,  # protocol 0: `I01` is True, which genops gives as a bool already
    "LONG": lambda arg: arg,
}
_IGNORED = {"PROTO", "FRAME"}
_MEMO_PUT = {"PUT", "BINPUT", "LONG_BINPUT"}
_MEMO_GET = {"GET", "BINGET", "LONG_BINGET"}
_PAST_DIGITS = 10**MAX_INT_DIGITS


class PickleError(ValueError):
    """A pickle this reader refuses or cannot read; the message is one line."""


def load_plain(data: bytes, max_size: int) -> Any:
    """The value pickled in `data`, refused (PickleError) past the bounds: more objects than
    AZR_MAX_PICKLE_OBJECTS, nested deeper than MAX_PICKLE_DEPTH, an integer longer than MAX_INT_DIGITS, or more than
    `max_size` once shared references are expanded (each object counts 32, a string or bytes its length too)."""
    limit = env_limit(*MAX_PICKLE_OBJECTS)
    stack: list[Any] = []
    marks: list[int] = []
    memo: dict[int, Any] = {}
    made = 0
    try:
        for op, arg, pos in pickletools.genops(data):
            name = op.name
            if name in _IGNORED:
                continue
            if name == "STOP":
                if len(stack) != 1 or marks:
                    raise PickleError(f"malformed pickle (at byte {pos}, {len(stack)} values at its end)")
                return _checked(stack[0], max_size)
            if name in _SCALARS:
                value = _SCALARS[name](arg)
                if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _PAST_DIGITS:
                    raise PickleError(f"an integer of more than {MAX_INT_DIGITS:,} digits (at byte {pos})")
                stack.append(value)
            elif name in ("EMPTY_LIST", "EMPTY_DICT", "EMPTY_TUPLE"):
                stack.append({"EMPTY_LIST": list, "EMPTY_DICT": dict, "EMPTY_TUPLE": tuple}[name]())
            elif name == "MARK":
                marks.append(len(stack))
            elif name in ("LIST", "TUPLE", "DICT", "APPENDS", "SETITEMS", "POP_MARK"):
                items = _pop_mark(stack, marks, pos)
                if name == "LIST":
                    stack.append(items)
                elif name == "TUPLE":
                    stack.append(tuple(items))
                elif name == "DICT":
                    stack.append(_pairs({}, items, pos))
                elif name == "APPENDS":
                    _top(stack, list, pos).extend(items)
                elif name == "SETITEMS":
                    _pairs(_top(stack, dict, pos), items, pos)
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                n = int(name[-1])
                if len(stack) < n:
                    raise PickleError(f"malformed pickle (at byte {pos})")
                items = stack[len(stack) - n :]
                del stack[len(stack) - n :]
                stack.append(tuple(items))
            elif name == "APPEND":
                item = _pop(stack, pos)
                _top(stack, list, pos).append(item)
            elif name == "SETITEM":
                value, key = _pop(stack, pos), _pop(stack, pos)
                _pairs(_top(stack, dict, pos), [key, value], pos)
            elif name in _MEMO_PUT or name == "MEMOIZE":
                memo[len(memo) if name == "MEMOIZE" else arg] = _peek(stack, pos)
            elif name in _MEMO_GET:
                if arg not in memo:
                    raise PickleError(f"malformed pickle (at byte {pos}, memo {arg} never set)")
                stack.append(memo[arg])
            elif name == "POP":
                _pop(stack, pos)
            elif name == "DUP":
                stack.append(_peek(stack, pos))
            elif name in ("GLOBAL", "STACK_GLOBAL"):
                where = arg.replace(" ", ".") if name == "GLOBAL" else ".".join(map(str, stack[-2:]))
                raise PickleError(f"refused to load {where}: only plain data is read")
            else:
                raise PickleError(f"refused opcode {name} at byte {pos}: only plain data is read")
            made += 1
            if made > limit:
                raise PickleError(f"more than {limit:,} objects ({MAX_PICKLE_OBJECTS[0]}=N raises it)")
    except PickleError:
        raise
    except (ValueError, TypeError, KeyError) as exc:  # genops: an unknown opcode, data cut short
        raise PickleError(f"malformed pickle: {str(exc).splitlines()[0][:200]}") from None
    raise PickleError("malformed pickle: no STOP at its end")


def _pop(stack: list[Any], pos: int) -> Any:
    if not stack:
        raise PickleError(f"malformed pickle (at byte {pos}, stack empty)")
    return stack.pop()


def _peek(stack: list[Any], pos: int) -> Any:
    if not stack:
        raise PickleError(f"malformed pickle (at byte {pos}, stack empty)")
    return stack[-1]


def _top(stack: list[Any], kind: type, pos: int) -> Any:
    top = _peek(stack, pos)
    if type(top) is not kind:
        raise PickleError(f"malformed pickle (at byte {pos}, {kind.__name__} expected)")
    return top


def _pop_mark(stack: list[Any], marks: list[int], pos: int) -> list[Any]:
    if not marks:
        raise PickleError(f"malformed pickle (at byte {pos}, no mark)")
    start = marks.pop()
    items = stack[start:]
    del stack[start:]
    return items


def _pairs(target: dict[Any, Any], items: list[Any], pos: int) -> dict[Any, Any]:
    for key, value in zip(items[::2], items[1::2], strict=False):
        if isinstance(key, (list, dict)):
            raise PickleError(f"malformed pickle (at byte {pos}, an unhashable key)")
        target[key] = value
    return target


def _checked(value: object, max_size: int) -> object:
    """`value` when it holds no cycle, nests at most MAX_PICKLE_DEPTH deep and expands (shared references counted
    each time they occur) to at most `max_size`: one depth-first pass over the distinct objects (a shared one is
    sized once), the path from the top being what is open (a container met again on it holds itself)."""
    size: dict[int, int] = {}
    open_ids: set[int] = set()
    todo: list[tuple[Any, bool]] = [(value, False)]
    while todo:
        node, done = todo.pop()
        key = id(node)
        if not isinstance(node, (list, tuple, dict)):
            continue
        children = list(node.keys()) + list(node.values()) if isinstance(node, dict) else list(node)
        if done:
            open_ids.discard(key)
            size[key] = _NODE + sum(size.get(id(c), _leaf(c)) for c in children)
            if size[key] > max_size:
                raise PickleError(f"expands to more than {max_size:,} bytes (shared references counted each time)")
            continue
        if key in open_ids:
            raise PickleError("a container that holds itself")
        if key in size:
            continue
        open_ids.add(key)
        if len(open_ids) > MAX_PICKLE_DEPTH:  # the path from the top: checked on the way down, never a deep pass
            raise PickleError(f"nested more than {MAX_PICKLE_DEPTH} levels deep")
        todo.append((node, True))
        todo += [(c, False) for c in children if isinstance(c, (list, tuple, dict))]
    return value if isinstance(value, (list, tuple, dict)) or _leaf(value) <= max_size else _too_big(max_size)


def _leaf(value: object) -> int:
    return _NODE + (len(value) if isinstance(value, (str, bytes)) else 0)


def _too_big(max_size: int) -> Any:
    raise PickleError(f"expands to more than {max_size:,} bytes")
