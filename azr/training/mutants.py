"""Near misses: variants of a reference solution with one operator, keyword or constant changed.

The SFT warm start can mix near misses that fail the tests in with the reference answers (`sft.near_misses`). A
policy warm-started that way writes the answer's shape but stays unsure at a few decision points (`<` or `<=`,
`+ 1` or not, `min` or `max`), like a base model that knows the language and makes the usual slips. Only its own
samples, graded in the sandbox, can tell it which choice is right: the regime in which GRPO's group-relative
advantage has something to sharpen, and what the tiny CPU demo needs to show learning.

This module only writes candidates (each one a single token edit that still compiles); `azr.training.sft` grades
them and keeps those that fail.
"""

from __future__ import annotations

import io
import random
import tokenize
import warnings

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
