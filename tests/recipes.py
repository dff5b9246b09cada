"""The tiny recipe the training tests start from: a LoRA of rank 4 on the tiny model, four tasks, two prompts of two
completions a step for two steps, plain console, no pass-rate measurement. Each test states only what it changes.
Also a reward that tells a random policy's samples apart, for tests of which groups train."""

from __future__ import annotations

import copy
import zlib
from pathlib import Path
from typing import Any

import yaml

TINY: dict[str, Any] = {
    "seed": 0,
    "model": {"adapter": {"r": 4}},
    "data": {"max_tasks": 4},
    "grpo": {
        "num_generations": 2,
        "per_device_train_batch_size": 4,  # two prompts, two completions each
        "max_completion_length": 16,
        "max_steps": 2,
        "save_steps": 2,
        "logging_steps": 1,
    },
    "logging": {"console": "plain", "pass_rate_tasks": 0},
    "sandbox": {"workers": 2},
}


def tiny_recipe(model_dir: Path | str, out: Path | str, **sections: Any) -> dict[str, Any]:
    """TINY training `model_dir` into `out`, with `sections` over it: a mapping is merged into the section one level
    deep, anything else replaces the section."""
    recipe = copy.deepcopy(TINY)
    recipe["output_dir"] = str(out)
    recipe["model"]["name_or_path"] = str(model_dir)
    for name, values in sections.items():
        merge = isinstance(values, dict) and isinstance(recipe.get(name), dict)
        recipe[name] = {**recipe[name], **values} if merge else values
    return recipe


def write_recipe(path: Path, recipe: dict[str, Any]) -> Path:
    """`recipe` as YAML at `path`; the path."""
    path.write_text(yaml.safe_dump(recipe))
    return path


def tiny_grpo_args(output_dir: Path | str, **overrides: Any):
    """TRL's GRPOConfig for a trainer built directly in a test: CPU, two prompts of two completions a step, no
    report or progress bar; `overrides` are the GRPOConfig fields the test changes."""
    from trl import GRPOConfig

    base: dict[str, Any] = {
        "use_cpu": True,
        "bf16": False,
        "num_generations": 2,
        "per_device_train_batch_size": 4,
        "report_to": "none",
        "disable_tqdm": True,
    }
    return GRPOConfig(output_dir=str(output_dir), **{**base, **overrides})


def answer_parity_reward(completions, **columns) -> list[float]:
    """A custom reward (`rewards: [{name: "recipes:answer_parity_reward"}]`) that tells a random policy's samples
    apart: the parity of the answer text's CRC-32 (a feedback episode's final answer where the row has one). Groups
    of a model too weak to pass any test then differ, so dynamic sampling keeps, carries and trains them."""
    texts = columns.get("feedback_answer") or [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [float(zlib.crc32(str(t).encode()) % 2) for t in texts]


def one_reward(completions, **columns) -> list[float]:
    """A custom reward of 1.0 for every completion: with it, a weighted total shows its weight exactly."""
    return [1.0 for _ in completions]
