"""GRPO with tools (`tools.enabled`): TRL's `rollout_func` that plays each row as an episode of
`azr.envs.ToolEnvironment` through the episode runner and the trainer's own generation (HF generate, or the vLLM
backend), with `env_mask` keeping the tool results out of the loss; the rewards score the calls, results and final
answer the policy was shown (`COMPLETION`), as the generation log records them. Also the tool metrics of each log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from azr.data import Task
from azr.envs import ToolEnvironment, events_of, shown_messages, turn_parser
from azr.rollouts import ChatTokens, Episode, Limits, ScoredBatch
from azr.tools import Toolbox
from azr.training.episodes.rounds import COMPLETION, EpisodeRollouts

if TYPE_CHECKING:
    from azr.training.context import RunContext
    from azr.training.trl.private import GRPOTrainer

# The column of a row that counts its episode's tool calls and the failed ones (status other than ok).
CALLS = "tool_calls"


class ToolRollout:
    """TRL's `rollout_func` for GRPO with tools, and an observer of each scored batch.

    Each episode offers `toolbox`'s tools for at most `max_iterations` rounds of calls (TRL's
    `max_tool_calling_iterations`; None: as many as the row holds) in a row of at most `max_completion` tokens after
    the prompt, calls and results included (GRPO's `max_completion_length`): a result that would not fit is not shown
    and the episode ends there, as TRL's own tool loop did. `metrics()` gives, since the last log, TRL's two tool
    figures: `tools/call_frequency` (calls per episode) and `tools/failure_frequency` (failed calls per call)."""

    def __init__(
        self,
        toolbox: Toolbox,
        tasks: Mapping[str, Task],
        chat: ChatTokens,
        max_completion: int,
        max_iterations: int | None = None,
    ):
        check_template(chat, toolbox.schemas())
        # Every policy turn takes at least one token of the row, so without a bound of its own on the calls the
        # row's length ends an episode first.
        max_turns = max_completion if max_iterations is None else max_iterations + 1
        self.env = ToolEnvironment(toolbox, None, max_turns, None, turn_parser(chat, toolbox.schemas()))
        limits = Limits(max_turns=max_turns, max_completion=max_completion)
        self.rollouts = EpisodeRollouts(self.env, None, tasks, limits, columns=self.columns)
        self.calls = self.failures = self.episodes = 0

    @property
    def last(self) -> list[Episode]:
        """The last round's episodes (this process's rows, in order)."""
        return self.rollouts.last

    def __call__(self, prompts: list[Any], trainer: GRPOTrainer) -> dict[str, list[object]]:
        return self.rollouts(prompts, trainer)

    @staticmethod
    def columns(episodes: Sequence[Episode]) -> dict[str, list[Any]]:
        """What the rewards score (the messages the policy wrote and was shown: `completion_text` reads the answer
        after the last tool result) and each episode's [calls, failed calls]."""
        events = [events_of(e) for e in episodes]
        return {
            COMPLETION: [shown_messages(e) for e in episodes],
            CALLS: [[len(done), sum(not event.ok for event in done)] for done in events],
        }

    def observe(self, batch: ScoredBatch) -> None:
        """Counts the calls of every process's rows (the batch is gathered)."""
        for row in batch.inputs:
            if CALLS in row:
                calls, failed = row[CALLS]  # type: ignore[misc]
                self.episodes, self.calls, self.failures = self.episodes + 1, self.calls + calls, self.failures + failed

    def metrics(self) -> dict[str, float]:
        if not self.episodes:
            return {}
        out = {
            "tools/call_frequency": self.calls / self.episodes,
            "tools/failure_frequency": self.failures / self.calls if self.calls else 0.0,
        }
        self.calls = self.failures = self.episodes = 0
        return out


def check_template(chat: ChatTokens, schemas: list[dict]) -> None:
    """ValueError unless the chat template renders the tool schemas into the prompt and continues a conversation
    with a call and its result (checked before training, not at the first call)."""
    name = schemas[0]["function"]["name"]
    if name not in chat.render([{"role": "user", "content": "."}], schemas):
        raise ValueError("tools.enabled: the model's chat template does not render the tools it is offered")
    call = {"id": "call_0", "type": "function", "function": {"name": name, "arguments": {}}}
    assistant = {"role": "assistant", "content": "", "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": "call_0", "name": name, "content": "."}
    try:
        chat.observation(assistant, [result], True, schemas)
    except ValueError as exc:
        raise ValueError(
            f"tools.enabled: the model's chat template cannot continue a tool conversation ({exc})"
        ) from exc


def tool_rollouts(ctx: RunContext) -> ToolRollout:
    """The tool environment's `rollout_func` for a run (`azr.config.environments`): every row one episode of the tool
    loop, played as GRPO samples (TRL's tokenizer and chat template arguments, its `max_completion_length` and
    `max_tool_calling_iterations`); `python_run` shares the rewards' sandbox pool."""
    from azr.tools import build_toolbox

    args, tokenizer = ctx.args.grpo, ctx.tokenizer
    toolbox = build_toolbox(ctx.cfg, ctx.rewards.grader.pool, tokenizer.all_special_tokens)
    chat = ChatTokens(tokenizer, args.chat_template_kwargs)
    tasks = {t.id: t for t in ctx.tasks}
    return ToolRollout(toolbox, tasks, chat, args.max_completion_length, args.max_tool_calling_iterations)
