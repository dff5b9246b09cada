"""Third-party chatter kept off the console and in the debug log: bitsandbytes' kernel and 8-bit notices demoted to
DEBUG, deprecation warnings raised from outside azr logged at DEBUG under `py.warnings`, and the progress bars of
datasets and transformers turned off. `logging.level: debug` shows them (docs/development.md lists each).
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

# Loggers whose warnings are notices about optional kernels and casts, not about the run.
DEMOTED_LOGGERS = ("bitsandbytes.backends.cpu.ops", "bitsandbytes.autograd._functions")
DEPRECATIONS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)
_AZR = str(Path(__file__).resolve().parents[1])
_state = {"installed": False}


class _Demote(logging.Filter):
    """Re-level a record to DEBUG; it goes on only where the root logger takes debug records."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


def quiet_third_party() -> None:
    """Route the chatter above to the debug log; idempotent. Call it before importing TRL (which imports
    bitsandbytes) for the import-time lines to be caught."""
    if not _state["installed"]:
        _state["installed"] = True
        for name in DEMOTED_LOGGERS:
            logging.getLogger(name).addFilter(_Demote())
        warnings.showwarning = _routed(warnings.showwarning)
    import datasets
    from transformers.utils import logging as hf_logging

    datasets.disable_progress_bars()
    hf_logging.disable_progress_bar()


def _routed(show):
    def showwarning(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, DEPRECATIONS) and not str(filename).startswith(_AZR):
            logging.getLogger("py.warnings").debug("%s:%s: %s: %s", filename, lineno, category.__name__, message)
            return
        show(message, category, filename, lineno, file, line)

    return showwarning
