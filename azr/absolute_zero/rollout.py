"""The propose-then-solve rollout of one generation batch (TRL's `rollout_func` in Absolute Zero mode): proposer
groups propose from their type's buffer, the sandbox validates, valid proposals get learnability samples, solver
groups take this batch's valid proposals then the buffer, and the valid proposals join their buffers. Returns the
rows TRL trains on (one-turn episodes, each tagged with the role that played it) with the columns the rewards read
(`az_*`). Model calls go through `generate` only; it computes no reward (docs/absolute-zero.md, "One step").
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from azr.absolute_zero.buffers import Buffers
from azr.absolute_zero.prompts import parse_proposal, proposer_messages, rules_text, solver_messages
from azr.absolute_zero.triplets import TaskType, Triplet
from azr.absolute_zero.validation import Validator, Verdict
from azr.config import AbsoluteZeroConfig
from azr.prompts import last_user_message
from azr.rollouts import Episode, rollout_columns

SLOT_MARK = "absolute_zero slot: "
ROLES = ("propose", "solve")


# `n` one-turn episodes of each conversation, in order, played by `role` (propose, or solve: the learnability samples
# and the solver's answers), with their token ids as TRL trains them.
Generate = Callable[[list[list[dict[str, str]]], int, str], list[Episode]]


def slot_rows(types: Sequence[TaskType], groups: int) -> list[dict[str, Any]]:
    """The GRPO dataset: `groups` prompt groups of a generation batch, split evenly over (role, type) slots."""
    slots = [(role, kind) for kind in types for role in ROLES]
    if groups % len(slots):
        raise ValueError(f"{groups} prompt groups do not split evenly over {len(slots)} (role, type) slots")
    return [
        {"prompt": [{"role": "user", "content": f"{SLOT_MARK}{role} {kind}"}]}
        for _ in range(groups // len(slots))
        for role, kind in slots
    ]


def read_slots(prompts: Sequence[Any], group: int) -> list[tuple[str, TaskType]]:
    """(role, type) of each group of `group` consecutive rows; ValueError if the rows are not slot rows."""
    if not prompts or len(prompts) % group:
        raise ValueError(f"absolute_zero: {len(prompts)} rows do not form groups of {group}")
    slots = []
    for start in range(0, len(prompts), group):
        texts = {str(last_user_message(p)) for p in prompts[start : start + group]}
        text = texts.pop() if len(texts) == 1 else ""
        role, _, kind = text.removeprefix(SLOT_MARK).partition(" ")
        if not text.startswith(SLOT_MARK) or role not in ROLES or not kind:
            raise ValueError(f"absolute_zero: rows {start}-{start + group - 1} are not one slot group: {text[:80]!r}")
        slots.append((role, kind))
    return slots  # type: ignore[return-value]


@dataclass
class _Group:
    """One prompt group's rows as the rollout fills them in: per row, the triplet line it is judged against, the
    validation reason ('' valid or a solver row), its detail, and a proposal's learnability samples."""

    role: str
    kind: TaskType
    conversation: list[dict[str, str]] | None = None
    rows: list[Episode] = field(default_factory=list)
    tasks: list[dict[str, Any] | None] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    samples: list[list[str]] = field(default_factory=list)


@dataclass
class _Proposal:
    kind: TaskType
    verdict: Verdict
    conversation: list[dict[str, str]] | None = None  # the solver's, when valid
    samples: list[Episode] | None = None  # its learnability samples


class Rollout:
    """The rows of TRL's `rollout_func` for a batch of slot prompts (`run`), drawn through a `Generate` at the training
    temperature; `generator(trainer)` makes one for the trainer that asks. Owns the buffers and its random generator
    (both saved with checkpoints); it never reads the trainer itself."""

    def __init__(
        self,
        cfg: AbsoluteZeroConfig,
        buffers: Buffers,
        validator: Validator,
        generator: Callable[[object], Generate],
        seed: int,
    ):
        self.cfg, self.buffers, self.validator, self.generator = cfg, buffers, validator, generator
        self.rules = rules_text(cfg.allowed_imports, cfg.max_output_chars)
        self.rng = random.Random(seed)
        self.stats: dict[str, list[float]] = defaultdict(list)

    def run(self, prompts: Sequence[Any], generate: Generate, group: int) -> dict[str, Any]:
        """The rows of one generation batch of slot `prompts` (groups of `group`), in TRL's rollout format."""
        groups = [_Group(role, kind) for role, kind in read_slots(prompts, group)]
        proposals = self._propose([g for g in groups if g.role == "propose"], generate, group)
        self._solve([g for g in groups if g.role == "solve"], proposals, generate, group)
        for proposal in proposals:
            if proposal.verdict.valid:
                self.buffers[proposal.kind].add(proposal.verdict.triplet)  # type: ignore[arg-type]
        self._count(proposals)
        return _output(groups, group)

    def seed_round(self, generate: Generate, group: int) -> dict[str, int]:
        """One round of the paper's seeding: a proposer group per task type, validated, the valid proposals added
        to their buffers; nothing is solved or trained. Returns the valid proposals per type."""
        proposers = [_Group("propose", kind) for kind in self.cfg.types]
        proposals = self._propose(proposers, generate, group, learnability=False)
        for proposal in proposals:
            if proposal.verdict.valid:
                self.buffers[proposal.kind].add(proposal.verdict.triplet)  # type: ignore[arg-type]
        return {kind: sum(p.verdict.valid for p in proposals if p.kind == kind) for kind in self.cfg.types}

    def _propose(
        self, proposers: list[_Group], generate: Generate, group: int, learnability: bool = True
    ) -> list[_Proposal]:
        shown: list[str | None] = []
        for g in proposers:
            refs = self._references(g.kind)
            shown.append(refs[0].program if g.kind == "induction" and refs else None)
            g.conversation = proposer_messages(g.kind, refs, self.rules, self.cfg.induction_inputs, self._shown)
        drawn = _draw(generate, [g.conversation for g in proposers], group, "propose")
        parsed: list[tuple[_Group, Triplet | None]] = []
        for n, (g, program) in enumerate(zip(proposers, shown, strict=True)):
            g.rows = drawn[n * group : (n + 1) * group]
            parsed += [(g, parse_proposal(g.kind, e.answer, program, self.cfg.induction_inputs)) for e in g.rows]
        checked = iter(self.validator.validate([t for _, t in parsed if t is not None]))
        proposals = [
            _Proposal(g.kind, next(checked) if t is not None else Verdict("format", "not in the asked format"))
            for g, t in parsed
        ]
        for p in proposals:
            if p.verdict.valid:
                p.conversation = solver_messages(p.kind, p.verdict.triplet, self._shown, self.rules)  # type: ignore
        asked = [p for p in proposals if p.conversation is not None and learnability]
        n = self.cfg.learnability_samples
        samples = _draw(generate, [p.conversation for p in asked], n, "solve")
        for k, p in enumerate(asked):
            p.samples = samples[k * n : (k + 1) * n]
        for (g, _), p in zip(parsed, proposals, strict=True):
            g.tasks.append(_line(p.verdict.triplet))
            g.reasons.append(p.verdict.reason)
            g.details.append(p.verdict.detail)
            g.samples.append([e.answer for e in p.samples] if p.samples else [])
        return proposals

    def _solve(self, solvers: list[_Group], proposals: list[_Proposal], generate: Generate, group: int) -> None:
        """A task for each solver group: this batch's valid proposals of its type first, then its buffer. A group
        whose proposal has at least `group` learnability samples trains on them; the others are drawn now."""
        todo: list[tuple[_Group, Triplet]] = []
        for kind in dict.fromkeys(g.kind for g in solvers):
            mine = [g for g in solvers if g.kind == kind]
            fresh = [p for p in proposals if p.kind == kind and p.verdict.valid]
            self.rng.shuffle(fresh)
            chosen = fresh[: len(mine)]
            filled = self._fill(kind, len(mine) - len(chosen))
            self.stats[f"absolute_zero/{kind}/solve/from_buffer"].append(len(filled) / len(mine))
            for g, p in zip(mine, chosen, strict=False):
                triplet = p.verdict.triplet
                if p.samples is not None and len(p.samples) >= group:
                    g.conversation, g.rows, g.tasks = p.conversation, p.samples[:group], [_line(triplet)] * group
                else:
                    todo.append((g, triplet))  # type: ignore[arg-type]
            todo += list(zip(mine[len(chosen) :], filled, strict=True))
        for g, triplet in todo:
            g.conversation = solver_messages(g.kind, triplet, self._shown, self.rules)
            g.tasks = [_line(triplet)] * group
        drawn = _draw(generate, [g.conversation for g, _ in todo], group, "solve")
        for n, (g, _) in enumerate(todo):
            g.rows = drawn[n * group : (n + 1) * group]
        for g in solvers:
            g.reasons, g.details, g.samples = [""] * group, [""] * group, [[] for _ in range(group)]

    @property
    def _shown(self) -> int:
        return self.cfg.induction_shown

    def _references(self, kind: TaskType) -> list[Triplet]:
        if kind == "induction":  # one program, from the deduction and abduction buffers (the paper's choice)
            programs = self.buffers.programs() or self.buffers["induction"].triplets()
            return [self.rng.choice(programs)] if programs else []
        return self.buffers[kind].sample(self.cfg.references, self.rng)

    def _fill(self, kind: TaskType, count: int) -> list[Triplet]:
        if count <= 0:
            return []
        buffer = self.buffers[kind]
        drawn = buffer.sample(count, self.rng)
        while len(drawn) < count and len(buffer):  # a buffer smaller than the batch: tasks come round again
            drawn += buffer.sample(count - len(drawn), self.rng)
        if len(drawn) < count:
            raise RuntimeError(f"absolute_zero: the {kind} buffer is empty; nothing to give its solver")
        return drawn

    def _count(self, proposals: list[_Proposal]) -> None:
        by_type: dict[str, Counter[str]] = defaultdict(Counter)
        for p in proposals:
            by_type[p.kind][p.verdict.reason or "valid"] += 1
        for kind, counts in by_type.items():
            total = sum(counts.values())
            self.stats[f"absolute_zero/{kind}/proposals/valid"].append(counts["valid"] / total)
            for reason, count in counts.items():
                if reason != "valid":
                    self.stats[f"absolute_zero/{kind}/invalid/{reason}"].append(count / total)
        for kind, size in self.buffers.sizes().items():
            self.stats[f"absolute_zero/{kind}/buffer"].append(float(size))

    def metrics(self) -> dict[str, float]:
        """Means of what the rollout measured since the last call (validity by reason, buffer sizes)."""
        found = {name: sum(values) / len(values) for name, values in self.stats.items() if values}
        self.stats.clear()
        return found

    def state(self) -> dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {"rng": [version, list(internal), gauss]}

    def load_state(self, state: dict[str, Any]) -> None:
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))


def _draw(generate: Generate, conversations: list, n: int, role: str) -> list[Episode]:
    return generate(conversations, n, role) if conversations else []


def _line(triplet: Triplet | None) -> dict[str, Any] | None:
    return triplet.to_line() if triplet is not None else None


def _output(groups: list[_Group], group: int) -> dict[str, Any]:
    """TRL's rollout output: the episodes' token ids and sampler log-probs per row in slot order (None for every row
    unless all have them: the transformers backend samples without), and one column per field the rewards read."""
    out: dict[str, Any] = dict(rollout_columns([e for g in groups for e in g.rows]))
    out |= {k: [] for k in ("az_role", "az_type", "az_prompt", "az_task", "az_reason", "az_detail", "az_samples")}
    for g in groups:
        out["az_role"] += [g.role] * group
        out["az_type"] += [g.kind] * group
        out["az_prompt"] += [str(last_user_message(g.conversation) or "")] * group
        out["az_task"] += g.tasks
        out["az_reason"] += g.reasons
        out["az_detail"] += g.details
        out["az_samples"] += g.samples
    return out
