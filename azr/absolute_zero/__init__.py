"""Absolute Zero mode (Zhao et al. 2025): the policy proposes code-reasoning tasks (deduction, abduction, induction
over program/input/output triplets), the sandbox validates them, and the policy solves them. Task types and the
line format, prompts, validation and judging in the sandbox, rewards, buffers and seeds, the checker, and the
propose-then-solve rollout. The face of the package; it imports no torch, transformers or trl (the trainer wiring
is `azr.training`'s).
"""

from azr.absolute_zero.buffers import Buffers, TaskBuffer
from azr.absolute_zero.checker import LineVerdict, check_file
from azr.absolute_zero.judging import Judge, Outcome, build_judge
from azr.absolute_zero.prompts import (
    parse_proposal,
    proposal_text,
    proposer_messages,
    rules_text,
    solver_answer,
    solver_messages,
    warm_start_pairs,
)
from azr.absolute_zero.rewards import (
    ROLE_WEIGHTS,
    ProposeReward,
    RewardValues,
    SolveReward,
    build_az_rewards,
    build_az_rubric,
    learnability,
)
from azr.absolute_zero.rollout import SLOT_MARK, Generate, Rollout, read_slots, slot_rows
from azr.absolute_zero.seeds import fill_buffers, task_candidates, valid_seeds, zero_candidates
from azr.absolute_zero.triplets import (
    TASK_TYPES,
    TaskType,
    Triplet,
    read_numbered,
    read_triplets,
    split_pairs,
    triplet_from_line,
    write_triplets,
)
from azr.absolute_zero.validation import (
    REASONS,
    SANDBOX_ERROR,
    Rules,
    Validator,
    Verdict,
    build_validator,
)

__all__ = [
    "REASONS",
    "ROLE_WEIGHTS",
    "SANDBOX_ERROR",
    "SLOT_MARK",
    "TASK_TYPES",
    "Buffers",
    "Generate",
    "Judge",
    "LineVerdict",
    "Outcome",
    "ProposeReward",
    "RewardValues",
    "Rollout",
    "Rules",
    "SolveReward",
    "TaskBuffer",
    "TaskType",
    "Triplet",
    "Validator",
    "Verdict",
    "build_az_rewards",
    "build_az_rubric",
    "build_judge",
    "build_validator",
    "check_file",
    "fill_buffers",
    "learnability",
    "parse_proposal",
    "proposal_text",
    "proposer_messages",
    "read_numbered",
    "read_slots",
    "read_triplets",
    "rules_text",
    "slot_rows",
    "solver_answer",
    "solver_messages",
    "split_pairs",
    "task_candidates",
    "triplet_from_line",
    "valid_seeds",
    "warm_start_pairs",
    "write_triplets",
    "zero_candidates",
]
