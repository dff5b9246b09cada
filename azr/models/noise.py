"""Third-party chatter kept off the console and in the debug log, where each line really comes from:

- bitsandbytes *logs* (through `logging`, at import) "Failed to load CPU gemm_4bit_forward from kernels-community"
  on CPUs with AVX512-BF16 when the optional `kernels` package cannot fetch its kernel (it falls back to its own),
  and a warning for every 8-bit matmul that casts its inputs: both records are demoted to DEBUG.
- Deprecation notices that libraries *raise* with `warnings.warn` (FutureWarning, DeprecationWarning), such as
  transformers' "`gradient_checkpointing_enable` is deprecated" that peft and TRL trigger: logged at DEBUG under
  `py.warnings` instead of printed, when raised from outside azr. Other warnings print as before.
- the progress bars datasets and transformers draw for tiny maps and shard writes: turned off.

With the log at debug level (`logging.level: debug`) the demoted lines show, marked DEBUG.
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
