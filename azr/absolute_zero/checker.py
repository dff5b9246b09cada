"""`azr absolute-zero check`: every triplet of a file validated exactly as the mode validates proposals.

A line with outputs must also reproduce them (else `output_mismatch`); a line without is checked as a proposal is,
its outputs computed with every check applied. Reading the file first rejects a malformed line (DataError naming
`file:line`) before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from azr.absolute_zero.triplets import read_numbered
from azr.absolute_zero.validation import build_validator
from azr.config import AbsoluteZeroConfig, SandboxConfig


@dataclass(frozen=True)
class LineVerdict:
    line: int
    valid: bool
    reason: str  # '' when valid
    detail: str = ""
    outputs: tuple[str, ...] | None = None  # the outputs the program returned, when valid

    def to_json(self) -> dict:
        return {"line": self.line, "valid": self.valid, "reason": self.reason}


def check_file(path: Path, sandbox: SandboxConfig, cfg: AbsoluteZeroConfig) -> list[LineVerdict]:
    """A verdict per non-blank line of `path`, in order."""
    numbered = read_numbered(path)
    verdicts = build_validator(sandbox, cfg).validate([t for _, t in numbered]) if numbered else []
    return [
        LineVerdict(n, v.valid, v.reason, v.detail, v.triplet.outputs if v.triplet else None)
        for (n, _), v in zip(numbered, verdicts, strict=True)
    ]
