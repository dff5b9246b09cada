"""The rollout seam, as typed data: a `ScoredGroup` (one prompt's completions with token ids, sampler log-probs,
rewards, the policy `version` that sampled them), a `ScoredRound` of them from a `RolloutSource`, a `ScoredBatch`
(what one process scored in a round, for observers), the policy's two faces (`TokenSampler`: token ids in,
continuations out, the trained policy; `TextPolicy`: messages in, a message out, an endpoint), and `TrainerView` /
`BatchView`, what samplers and batch composition need of a trainer (implemented in `azr.training.trl.private`).
Owns the shapes of the seam only: no generation, no reward, no TRL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, Union

from azr.prompts import completion_text, last_user_message

if TYPE_CHECKING:
    import torch
    from peft import PeftModel
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

# A dataset row as the group sampler shapes it (prompt, task_id, tests, ... and the columns rewards read).
Row = dict[str, object]
VERSION = "policy_version"  # the row column the asynchronous pipeline's rollout function sets
Policy = Union["PreTrainedModel", "PeftModel"]  # a causal LM, with or without a peft adapter
# TRL's importance-sampling correction of vLLM samples: its mode and the ratio's lower and upper bounds.
Correction = tuple[str, "float | None", "float | None"]


@dataclass(frozen=True)
class RolloutTiming:
    """When a group was sampled: wall-clock start (time.time()) and seconds spent generating and scoring."""

    started: float = 0.0
    generate_s: float = 0.0
    score_s: float = 0.0


@dataclass
class ScoredGroup:
    """One prompt group of a round. `tensors` are the rows as the trainer trains them (TRL's per-row tensors:
    prompt and completion ids and masks, advantages, the sampler's and the old policy's per-token log-probs);
    `signal` whether its graded rewards differ (a group that teaches under GRPO); `born` the generation batch it was
    generated for. The rest describes it for every other consumer."""

    tensors: dict[str, torch.Tensor]
    task_id: str
    signal: bool
    born: int
    version: int = 0  # optimizer steps the sampling policy had taken
    rewards: list[float | None] = field(default_factory=list)  # weighted total per completion; None: not graded
    breakdown: dict[str, list[float | None]] = field(default_factory=dict)  # reward function -> per completion
    timing: RolloutTiming = field(default_factory=RolloutTiming)
    texts: list[str] = field(default_factory=list)  # each completion decoded (`sample_groups`'; TRL's keep none)

    @classmethod
    def sampled(
        cls,
        task_id: str,
        prompt_ids: list[int],
        completion_ids: list[list[int]],
        texts: list[str],
        *,
        version: int,
        pad_id: int = 0,
        logprobs: list[list[float]] | None = None,
        timing: RolloutTiming | None = None,
    ) -> ScoredGroup:
        """A group sampled outside GRPO's round (not scored yet: no rewards, no signal): its rows padded as TRL pads
        them, the prompt on the left (one prompt for the group), completions on the right."""
        import torch

        n, width = len(completion_ids), max((len(c) for c in completion_ids), default=0)
        tensors = {
            "prompt_ids": torch.tensor([prompt_ids] * n, dtype=torch.long).reshape(n, len(prompt_ids)),
            "prompt_mask": torch.ones(n, len(prompt_ids), dtype=torch.long),
            "completion_ids": torch.tensor(
                [c + [pad_id] * (width - len(c)) for c in completion_ids], dtype=torch.long
            ).reshape(n, width),
            "completion_mask": torch.tensor(
                [[1] * len(c) + [0] * (width - len(c)) for c in completion_ids], dtype=torch.long
            ).reshape(n, width),
        }
        if logprobs is not None:
            rows = [list(lp) + [0.0] * (width - len(lp)) for lp in logprobs]
            tensors["sampling_per_token_logps"] = torch.tensor(rows, dtype=torch.float).reshape(n, width)
        return cls(tensors, task_id, False, 0, version=version, timing=timing or RolloutTiming(), texts=list(texts))

    @property
    def completion_ids(self) -> list[list[int]]:
        """Each completion's token ids, without padding."""
        ids, mask = self.tensors["completion_ids"], self.tensors["completion_mask"]
        return [row[m.bool()].tolist() for row, m in zip(ids, mask, strict=True)]

    @property
    def prompt_ids(self) -> list[int]:
        """The prompt's token ids (the group shares one prompt), without padding."""
        ids, mask = self.tensors["prompt_ids"][0], self.tensors["prompt_mask"][0]
        return ids[mask.bool()].tolist()

    @property
    def sampler_logprobs(self) -> list[list[float]] | None:
        """Per completion token, the log-probability the sampler gave it (vLLM's processed logprobs); None when the
        policy generated in the trainer, which then is the sampler."""
        logps = self.tensors.get("sampling_per_token_logps")
        if logps is None:
            return None
        mask = self.tensors["completion_mask"]
        return [row[m.bool()].tolist() for row, m in zip(logps, mask, strict=True)]

    def staleness(self, version_now: int) -> int:
        """Policy versions between the sampler and the weights that train this group."""
        return version_now - self.version


@dataclass
class ScoredRound:
    """One round of a source: `batch`, this process's rows as the trainer trains them (TRL's dict, intact);
    `groups`, the same rows as whole prompt groups (empty when a group is split over processes); `signals`, whether
    each group of every process's rows differs (the counts are the same on every process)."""

    batch: dict[str, torch.Tensor]
    groups: list[ScoredGroup]
    signals: list[bool]


@dataclass
class ScoredBatch:
    """What one process scored in one generation round, row by row; `rewards` is (rows, reward functions)."""

    step: int
    inputs: list[Row]
    prompts: list[object]
    completions: list[object]
    rewards: torch.Tensor
    reward_names: list[str]
    details: list[dict[str, object]]

    def records(self) -> list[dict[str, object]]:
        """One JSON-ready record per completion: prompt, completion, each reward, and the grader's verdict."""
        out = []
        for i, (row, prompt, completion) in enumerate(zip(self.inputs, self.prompts, self.completions, strict=True)):
            rewards = {n: _finite(v) for n, v in zip(self.reward_names, self.rewards[i].tolist(), strict=True)}
            out.append(
                {
                    "step": self.step,
                    "task_id": row.get("task_id"),
                    "prompt": str(last_user_message(prompt) or ""),
                    "completion": completion_text(completion),
                    "source": row.get("source", "data"),  # data / hint (a hinted retry) / replay (frontier)
                    "hinted": bool(row.get("hint")),
                    "opponent_passed": row.get("opponent_passed"),
                    **({"policy_version": row["policy_version"]} if "policy_version" in row else {}),
                    "rewards": rewards,
                    **(self.details[i] if i < len(self.details) else {}),
                    **({"messages": completion} if _used_tools(completion) else {}),  # calls and results, in order
                    **({"turns": row["feedback_episode"]} if "feedback_episode" in row else {}),  # answers, feedback
                }
            )
        return out


def _used_tools(completion: object) -> bool:
    return isinstance(completion, list) and any(isinstance(m, dict) and m.get("role") == "tool" for m in completion)


def _finite(value: float) -> float | None:
    return None if value != value else value  # NaN (not graded) becomes JSON null


@dataclass
class Sampling:
    """How a policy is sampled: `n` completions per prompt, the token budget and the decoding settings."""

    n: int = 4  # completions per task
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: no top-k cut. Explicit, because `generate` would otherwise apply transformers' default of 50
    min_p: float | None = None
    repetition_penalty: float = 1.0
    batch_size: int = 32  # rows per `generate` call (HF generate only)
    # HF generate draws from this seed (restoring the generators after), a server's request is seeded with it; None:
    # unseeded (the sampler's own random stream, which whatever else it drew has advanced)
    seed: int | None = 0


@dataclass(frozen=True)
class Prompt:
    """One prompt to sample a group for: its task and its conversation (`tools`: the tool schemas the chat template
    renders, for the tool loop's turns)."""

    task_id: str
    messages: list[dict[str, object]]
    tools: list[dict[str, object]] | None = None


@dataclass(frozen=True)
class Continuation:
    """One sampled continuation of a context of token ids: the ids (through the end-of-sequence token when it came),
    the sampler's log-probability of each (None where it gives none), the text decoded without special tokens (as
    TRL decodes for its rewards), `raw` with them kept and the final end-of-sequence token dropped (what a tool-call
    parser reads), why it stopped: `stop` (the policy ended its turn) or `length` (the token budget ran out), and the
    policy `version` that drew it (optimizer steps taken; None where the sampler does not know)."""

    ids: list[int]
    text: str
    finish_reason: str
    logprobs: list[float] | None = None
    raw: str = ""
    version: int | None = None


class TokenSampler(Protocol):
    """What continues token ids: one `Continuation` per context, in order, at `sampling`'s settings, where `n` says
    the contexts come in runs of `n` identical ones (a group's first turn; a vLLM backend samples a run as one
    request; 1 when they do not). HF `generate` and vLLM's completions endpoint with prompt token ids both can, so an
    episode's earlier turns are never re-tokenized from text."""

    def complete(self, contexts: list[list[int]], sampling: Sampling) -> list[Continuation]: ...


@dataclass(frozen=True)
class Reply:
    """An endpoint policy's turn (messages in, a message out, no token ids): the assistant `message` (content, and
    tool calls where the API returned them), why it stopped (`stop` / `length` / `error`), the usage it reported, and
    the error when the request failed."""

    message: dict[str, object]
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None

    @property
    def text(self) -> str:
        content = self.message.get("content")
        return content if isinstance(content, str) else ""


class TextPolicy(Protocol):
    """A policy that answers a conversation with one message (an OpenAI-compatible endpoint): what runs an
    environment when no token ids are at hand."""

    async def reply(
        self, messages: list[dict[str, object]], tools: list[dict] | None, max_new_tokens: int, seed: int
    ) -> Reply: ...


class RolloutSource(Protocol):
    """What produces scored groups from dataset rows, `group_size` completions per prompt (TRL's round, with or
    without completions sampled ahead by the asynchronous pipeline)."""

    @property
    def group_size(self) -> int: ...

    def round(self, rows: list[Row], born: int) -> ScoredRound: ...


class TrainerView(Protocol):
    """What a sampler needs of a GRPO trainer (`azr.training.trl.private.TrainerBatches` implements it): the step
    being trained, the policy and its tokenizer, and the trainer's own engine (its vLLM backend, or generation at
    GRPO's settings)."""

    @property
    def step(self) -> int: ...

    @property
    def policy(self) -> Policy: ...

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase: ...

    @property
    def backend(self) -> object | None: ...

    def sample_backend(
        self, prompt_ids: list[list[int]], n: int, temperature: float, max_tokens: int
    ) -> tuple[list[list[int]], list[list[float]] | None]: ...

    def generate(
        self, prompts: list[object], n: int
    ) -> tuple[list[list[int]], list[list[int]], list[list[float]] | None, list[str]]: ...

    def generate_ids(self, prompt_ids: list[list[int]], n: int) -> tuple[list[list[int]], list[list[float]] | None]:
        """Continuations of token ids through the trainer's own generation at GRPO's settings (`n`: each prompt is
        repeated `n` times in a row, which a vLLM backend samples as one request)."""
        ...


class BatchView(TrainerView, Protocol):
    """What batch composition needs of a GRPO trainer beyond its rounds (which arrive as `ScoredRound`s): the group
    size, padding and device, the policy's log-probabilities now, the weights published to the backend, and the two
    collectives the filter adds to TRL's own."""

    @property
    def group_size(self) -> int: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def pad_id(self) -> int: ...

    @property
    def pad_multiple(self) -> int | None: ...

    @property
    def correction(self) -> Correction: ...

    def policy_logps(self, batch: dict[str, torch.Tensor]) -> torch.Tensor: ...

    def global_max(self, value: int) -> int: ...

    def items_in_batch(self, batch: dict[str, torch.Tensor]) -> torch.Tensor: ...

    def sync_backend(self) -> None: ...
