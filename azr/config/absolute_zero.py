"""The `absolute_zero:` section: task types, buffers, validation limits, rewards and baselines of the propose/solve
mode (`mode: absolute_zero`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from azr.config.schema import field
from azr.errors import ConfigError

# Standard-library modules a proposed program may import: pure computation, no I/O, randomness or time.
SEED_KINDS = ("tasks", "zero")  # any other `seed` names triplet files
DEFAULT_IMPORTS = [
    "bisect",
    "cmath",
    "collections",
    "copy",
    "dataclasses",
    "decimal",
    "enum",
    "fractions",
    "functools",
    "heapq",
    "itertools",
    "math",
    "numbers",
    "operator",
    "re",
    "statistics",
    "string",
    "textwrap",
    "typing",
    "unicodedata",
]


@dataclass
class AbsoluteZeroConfig:
    types: list[Literal["deduction", "abduction", "induction"]] = field(
        factory=lambda: ["deduction", "abduction", "induction"],
        help="Task types proposed and solved: deduction (program + input -> output), abduction (program + output "
        "-> an input), induction (input/output pairs + message -> program). Each gets one proposer and one solver "
        "share of every generation batch.",
    )
    references: int = field(
        4,
        "Reference triplets from its type's buffer shown in each deduction / abduction proposer prompt.",
        gt=0,
        le=1000,
    )
    learnability_samples: int = field(
        4,
        "Solver samples, at the training temperature, drawn for each valid proposal to estimate its solve rate; "
        "when at least grpo.num_generations, a solver group built from the proposal trains on these same samples.",
        ge=2,
        le=1000,
    )
    induction_inputs: int = field(4, "Inputs an induction proposal gives for its program.", ge=2, le=1000)
    induction_shown: int = field(
        2,
        "Of those, input/output pairs shown to the induction solver; the others are hidden and must all pass.",
        ge=1,
        le=1000,
    )
    buffer_size: int = field(
        1024, "Most triplets kept per task type; a full buffer drops its oldest.", gt=0, le=10_000_000
    )
    seed: str | list[str] = field(
        "tasks",
        "How the buffers start: 'tasks' validates triplets made from data.train's reference solutions and test "
        "inputs; 'zero' starts from the paper's identity triplet alone; a triplet file, or a list of them (azr's "
        "lines or Absolute-Zero-Reasoner's own seed files, e.g. its deduction/abduction and its induction file), "
        "validates their triplets (outputs must reproduce) and starts from the valid ones.",
    )
    seed_rounds: int = field(
        0,
        "Rounds of proposals before the first step (one group per task type each, validated, the valid ones added "
        "to the buffers; nothing is trained): the paper's seeding phase, for seed 'zero'.",
        ge=0,
        le=1000,
    )
    baseline: Literal["group", "type_role"] = field(
        "group",
        "Advantage baseline: 'group' is TRL's per-prompt group (every group holds one task type and role); "
        "'type_role' centres each row on the mean of its (task type, role) in the batch and divides by that std "
        "(unless grpo.scale_rewards is 'none'): the paper's task-relative REINFORCE++.",
    )
    timeout_s: float = field(
        1.0,
        "Wall-clock limit for one program on all its inputs, in validation and in judging; longer is a timeout "
        "(counted from the program's start: a fresh interpreter's own start is not the program's time).",
        gt=0,
        le=3600,
    )
    max_output_chars: int = field(
        1000, "Longest repr of one output; a longer one makes a proposal invalid (never truncated).", gt=0, le=1 << 24
    )
    allowed_imports: list[str] = field(
        factory=lambda: list(DEFAULT_IMPORTS),
        help="Modules a proposed or induced program may import (dotted names by their top package).",
    )
    solve_correct: float = field(1.0, "Solver reward for a correct answer.")
    solve_wrong: float = field(-0.5, "Solver reward for a wrong answer in the right format.")
    solve_format: float = field(-1.0, "Solver reward for an answer not in the asked format.")
    propose_invalid: float = field(-1.0, "Proposer reward for an invalid proposal (any rejection reason).")
    propose_unlearnable: float = field(
        0.0, "Proposer reward for a valid proposal that every solver sample solved, or none did (learnability 0)."
    )

    @property
    def seed_files(self) -> list[str]:
        """The triplet files `seed` names; empty for 'tasks' and 'zero'."""
        if isinstance(self.seed, list):
            return list(self.seed)
        return [] if self.seed in SEED_KINDS else [self.seed]

    def __post_init__(self):
        if self.seed in ([], ""):
            raise ConfigError("absolute_zero.seed: expected 'tasks', 'zero' or triplet files, got none")
        if isinstance(self.seed, list) and set(self.seed) & set(SEED_KINDS):
            raise ConfigError(
                f"absolute_zero.seed: 'tasks' and 'zero' stand alone, not in a list of files: {self.seed}"
            )
        if not self.types:
            raise ConfigError("absolute_zero.types: at least one task type is required")
        if len(set(self.types)) != len(self.types):
            raise ConfigError(f"absolute_zero.types: a type is listed twice: {self.types}")
        if self.induction_shown >= self.induction_inputs:
            raise ConfigError(
                f"absolute_zero.induction_shown: must be below induction_inputs ({self.induction_inputs}), so some "
                f"pairs stay hidden; got {self.induction_shown}"
            )
