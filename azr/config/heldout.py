"""The `eval:` section: held-out evaluation during GRPO (how often, on which tasks, how many samples, which pass@k),
and its checks at load.

Only the recipe's side: the evaluation itself is `azr.evaluation.heldout`'s, attached to the GRPO trainer by
`azr.training`. `azr eval`'s own settings (a separate command) are not this section.
"""

from __future__ import annotations

from dataclasses import dataclass

from azr.config.schema import field
from azr.errors import ConfigError


@dataclass
class HeldOutConfig:
    every_steps: int = field(
        0,
        "Evaluate the policy on held-out tasks every this many GRPO steps (and at the first and last step); 0 never. "
        "Each evaluation is one 'eval' record in metrics.jsonl and eval/ keys in the grpo.report_to loggers.",
        ge=0,
        le=10_000_000,
    )
    tasks: str | None = field(
        None,
        "Held-out tasks: a shipped split or a task file (read with data.eval_column_map); null for data.eval.",
    )
    max_tasks: int | None = field(
        64,
        "Evaluate on at most this many of those tasks (a seeded draw, the same at every evaluation); null for all.",
        gt=0,
        le=10_000_000,
    )
    samples: int = field(4, "Completions sampled per task at each evaluation (n of pass@k).", gt=0, le=1024)
    k: list[int] = field(factory=lambda: [1], help="The k of each pass@k reported; each at most eval.samples.", le=1024)
    temperature: float | None = field(
        None, "Sampling temperature; null for GRPO's own (grpo.temperature); 0 is greedy.", ge=0, le=10
    )
    max_new_tokens: int | None = field(
        None, "Most new tokens per completion; null for GRPO's grpo.max_completion_length.", gt=0, le=1 << 20
    )
    turns: int = field(
        1,
        "Attempts per sample: above 1, a sample whose program fails a public test gets the failures as feedback "
        "(feedback: section) and tries again, and pass@1 on the hidden tests is reported after each turn (eval/turn_N "
        "keys). 1 is the plain single attempt on all tests.",
        ge=1,
        le=32,
    )
    stop_on_alarm: bool = field(
        False,
        "Stop the run cleanly (final model saved) when a reward-hacking alarm fires, e.g. the training reward rising "
        "while the held-out pass rate falls (GRPO and Absolute-Zero mode).",
    )


def check_heldout(ev: HeldOutConfig, data_eval: str | None, mode: str) -> None:
    """Refuse, naming the field, an `eval:` section no run could carry out (`data_eval` is data.eval, the held-out
    tasks by default; `mode` the recipe's)."""
    for i, k in enumerate(ev.k):
        if k < 1:
            raise ConfigError(f"eval.k[{i}]: expected a positive integer, got {k}")
        if k > ev.samples:
            raise ConfigError(f"eval.k[{i}]: {k} is more than eval.samples={ev.samples} (pass@k needs k samples)")
    if not ev.k:
        raise ConfigError("eval.k: at least one k is required, e.g. [1]")
    if len(set(ev.k)) != len(ev.k):
        raise ConfigError(f"eval.k: a value is listed twice ({ev.k})")
    if ev.every_steps and not (ev.tasks or data_eval):
        raise ConfigError("eval.tasks: no held-out tasks (data.eval is null); name a split or a task file")
    if ev.every_steps and mode == "absolute_zero":
        raise ConfigError("eval.every_steps: held-out evaluation runs in mode 'grpo' only, not 'absolute_zero'")
