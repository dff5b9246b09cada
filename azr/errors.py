"""The errors a user can cause, and the helpers that word them.

`UserError` is bad input (a config field, a flag, a data file): the CLI prints its one-line message and exits 2
before any slow work starts. `NotAvailableError` is something declared but not usable here (exit 1). Every package
raises these rather than its own kinds, so the CLI maps outcomes to exit codes in one place.
"""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Iterable


class UserError(ValueError):
    """Bad input from the user; the message is one line naming the field, flag or `file:line` at fault."""


class ConfigError(UserError):
    """A user error in a config file, a `--set` override or a CLI flag."""


class DataError(UserError):
    """Bad task data: the message names the file (and line or row) or the setting at fault."""


class NotAvailableError(RuntimeError):
    """Something azr declares but cannot do here (a missing optional package, an unsupported combination); exit 1."""


def did_you_mean(key: str, options: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest option, or ''."""
    close = difflib.get_close_matches(key, list(options), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def show(value: object) -> str:
    """A short repr for error messages, whatever the value: bounded in depth and length before it is made (a
    list nested a million deep, a million items), and an integer too long for Python to print named as such."""
    try:
        if isinstance(value, (str, bytes, int)):  # the first characters of repr(value), as ever
            text = repr(value[:80]) if isinstance(value, (str, bytes)) else repr(value)
        else:
            text = _SHORT.repr(value)
    except (ValueError, RecursionError, MemoryError):  # ValueError: an int past Python's str() digit limit
        text = f"<{type(value).__name__} too large to show>"
    return text if len(text) <= 60 else text[:57] + "..."


def _short_repr() -> reprlib.Repr:
    short = reprlib.Repr()
    short.maxlevel, short.maxstring, short.maxother, short.maxlong = 8, 80, 80, 80
    short.maxlist = short.maxtuple = short.maxdict = short.maxset = short.maxfrozenset = short.maxdeque = 30
    return short


_SHORT = _short_repr()
