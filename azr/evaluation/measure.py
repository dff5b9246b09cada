"""Sampling a local model on tasks and scoring what it wrote: the train-set pass rate `azr train` measures before
and after GRPO (with GRPO's own sampling settings), and the local sampler `azr eval` uses.

Samples whose code could not be graded (sandbox infrastructure errors) are left out of every rate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from azr.data import Task
from azr.prompts import chat_messages
from azr.rewards import CodeGrader


@dataclass
class Sampling:
    n: int = 4  # completions per task
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: no top-k cut. Explicit, because `generate` would otherwise apply transformers' default of 50
    min_p: float | None = None
    repetition_penalty: float = 1.0
    batch_size: int = 32
    seed: int = 0


def generate_completions(model, tokenizer, tasks: Sequence[Task], sampling: Sampling, template_kwargs: dict) -> list:
    """`sampling.n` completions per task (grouped by task), sampled with the model's own `generate`."""
    import torch

    prompts = [
        tokenizer.apply_chat_template(
            chat_messages(t.prompt), tokenize=False, add_generation_prompt=True, **template_kwargs
        )
        for t in tasks
        for _ in range(sampling.n)
    ]
    was_training = model.training
    model.eval()
    generator_state = save_rng(torch)
    torch.manual_seed(sampling.seed)  # the same samples for the same weights, whatever ran before
    out: list[str] = []
    try:
        for start in range(0, len(prompts), sampling.batch_size):
            batch = tokenizer(
                prompts[start : start + sampling.batch_size],
                return_tensors="pt",
                padding=True,
                padding_side="left",
                add_special_tokens=False,
            ).to(model.device)
            with torch.no_grad():
                ids = model.generate(
                    **batch,
                    max_new_tokens=sampling.max_new_tokens,
                    do_sample=sampling.temperature > 0,
                    temperature=sampling.temperature or None,
                    top_p=sampling.top_p,
                    top_k=sampling.top_k,
                    min_p=sampling.min_p,
                    repetition_penalty=sampling.repetition_penalty,
                    pad_token_id=tokenizer.pad_token_id,
                )
            out += tokenizer.batch_decode(ids[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
    finally:
        restore_rng(torch, generator_state)
        model.train(was_training)
    return out


def save_rng(torch) -> tuple:
    """The CPU generator's state and, where CUDA is available, every device's: what `torch.manual_seed` reseeds."""
    return torch.random.get_rng_state(), torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None


def restore_rng(torch, state: tuple) -> None:
    cpu, cuda = state
    torch.random.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


def score_completions(
    funcs: Sequence[Callable], weights: Sequence[float], grader: CodeGrader, tasks: Sequence[Task], completions: list
) -> dict[str, Any]:
    """Pass rate and weighted mean reward over completions grouped `len(completions) // len(tasks)` per task."""
    n = len(completions) // max(len(tasks), 1)
    columns: dict[str, Any] = {
        "tests": [t.tests for t in tasks for _ in range(n)],
        "setup": [t.setup for t in tasks for _ in range(n)],
        "task_id": [t.id for t in tasks for _ in range(n)],
        "timeout_s": [t.timeout_s for t in tasks for _ in range(n)],
        "memory_mb": [t.memory_mb for t in tasks for _ in range(n)],
    }
    per_func = [f(prompts=None, completions=completions, **columns) for f in funcs]
    statuses = [d["status"] for d in grader.last_details] if len(grader.last_details) == len(completions) else []
    totals, graded = [], 0
    for i in range(len(completions)):
        values = [f[i] for f in per_func]
        if statuses and statuses[i] == "error":  # not graded: neither a pass nor a failure
            continue
        graded += 1
        totals.append(sum(w * (v or 0.0) for w, v in zip(weights, values, strict=True)))
    passed = sum(s == "passed" for s in statuses)
    return {
        "completions": len(completions),
        "graded": graded,
        "pass_rate": passed / graded if graded else None,  # None (JSON null): nothing could be graded
        "reward": sum(totals) / len(totals) if totals else None,
        "tasks_solved": len({tasks[i // n].id for i, s in enumerate(statuses) if s == "passed"}) if n else 0,
    }
