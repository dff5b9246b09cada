"""Text from outside (programs, task files, endpoints) as it may be shown on a terminal: control characters escaped.

An escape sequence or a carriage return in a program's output or a task's error message would otherwise rewrite or
hide the line azr prints around it (a FAIL turned into a PASS). C0 and C1 controls and the bidirectional overrides
become visible escapes (`\\x1b`, `\\r`, `\\u202e`); newlines and tabs stay where a block of output keeps its lines.
"""

from __future__ import annotations

import re

_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROLS_AND_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _escape(match: re.Match) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def printable(text: str, lines: bool = False) -> str:
    """`text` with every control character escaped; with `lines`, newlines and tabs are kept as they are."""
    return (_CONTROLS if lines else _CONTROLS_AND_BREAKS).sub(_escape, text)
