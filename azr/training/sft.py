"""The SFT warm start before GRPO, through TRL's SFTTrainer, and its datasets and outputs under `output_dir/sft/`:
reference answers (prompt-completion rows, each prompt as GRPO renders it, loss on the completion); tool episodes
from `azr gen` (`sft.rollouts`: conversations, TRL's `assistant_only_loss`, prompts and tool results never trained);
feedback episodes (`rollouts.env: feedback`: TRL's pre-tokenized rows, the sampled ids with `assistant_masks` on the
policy's tokens, prompts and feedback never trained). `sft_phase` runs it on a run's context; `azr.training.run`
decides whether it runs or is skipped on resume.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from azr.audit import sample_candidates
from azr.config import environment_of
from azr.data import Task
from azr.errors import DataError
from azr.inputs import load_json
from azr.logs import atomic_write_json
from azr.prompts import chat_messages, reference_answer
from azr.rollouts import ChatTokens
from azr.training.context import RunContext
from azr.training.trl.sft import run_sft

log = logging.getLogger(__name__)
NEAR_MISS_WALL_S = 2.0  # per variant; reference solutions take milliseconds, so a slower variant is a hung one


def sft_dataset(
    tasks: list[Task],
    tokenizer,
    template_kwargs: dict[str, Any],
    near_misses: dict[str, list[str]] | None = None,
    repairs: list[tuple[Task, str, str]] = (),
):
    """Prompt-completion rows as plain text: the prompt through the chat template with GRPO's own switches (so the
    warm start conditions on the exact tokens the policy will later see), the answer closed by the EOS token. Each
    task's near misses (solutions that fail its tests) follow its reference answer as rows of their own. Each of
    `repairs` (task, near miss, the feedback on it) is a repair transcript: the near miss answered, its feedback as
    the next user turn, and the reference answer (and, as rows of their own, the task's other near misses) as the
    completion trained."""
    from datasets import Dataset

    rows = []
    chat = ChatTokens(tokenizer, template_kwargs)
    for task, miss, feedback in repairs:
        # The context exactly as an episode builds it: the prompt with its generation prompt, the answer closed by the
        # end-of-turn token it samples, and the chat template's delta for the feedback (`azr.rollouts.ChatTokens`).
        prompt = chat.render(chat_messages(task.prompt))
        answer = reference_answer(miss, task.entry_point)
        _, delta = chat.observation(
            {"role": "assistant", "content": answer}, [{"role": "user", "content": feedback}], True
        )
        # The fix beside the task's other near misses, as the first answer is learned beside them: the warm start
        # gives the repair its shape and leaves it in doubt, for GRPO to settle from the feedback.
        others = [m for m in (near_misses or {}).get(task.id, []) if m != miss]
        for fix in [task.solution or "", *others]:
            completion = reference_answer(fix, task.entry_point) + tokenizer.eos_token
            rows.append({"prompt": prompt + answer + tokenizer.eos_token + delta, "completion": completion})
    for task in tasks:
        if not task.solution:
            continue
        prompt = tokenizer.apply_chat_template(
            chat_messages(task.prompt), tokenize=False, add_generation_prompt=True, **template_kwargs
        )
        for solution in [task.solution, *(near_misses or {}).get(task.id, [])]:
            rows.append(
                {"prompt": prompt, "completion": reference_answer(solution, task.entry_point) + tokenizer.eos_token}
            )
    return Dataset.from_list(rows)


def rollout_dataset(rows: list[dict[str, Any]]):
    """Conversational rows (`messages`, `tools`) for assistant-only loss. Messages and tool schemas are stored with
    the datasets `Json` feature: Arrow would otherwise give every message every key seen in any message (a user
    message with `tool_calls: null`), which chat templates read as present."""
    from datasets import Dataset, Features, Json, List

    features = Features({"messages": List(Json()), "tools": List(Json())})
    return Dataset.from_list([{"messages": r["messages"], "tools": r["tools"]} for r in rows], features=features)


def episode_dataset(rows: list[dict[str, Any]], tokenizer, template_kwargs: dict[str, Any]):
    """Feedback episodes (`azr.tools.load_rollouts(..., env="feedback")` rows) as TRL's pre-tokenized rows:
    `input_ids` the episode through its last policy turn, `assistant_masks` 1 on the policy's tokens and 0 on the
    prompt's and the feedback's (TRL sets their labels to -100). DataError names the `file:line` of an episode whose
    ids the tokenizer does not have."""
    from datasets import Dataset

    chat, size = ChatTokens(tokenizer, template_kwargs), len(tokenizer)
    out, rebuilt = [], 0
    for row in rows:
        ids, mask, recorded = episode_tokens(row, chat)
        rebuilt += not recorded
        if ids and max(ids) >= size:
            raise DataError(f"{row['line']}: token id {max(ids)} is outside the tokenizer's vocabulary ({size} ids)")
        out.append({"input_ids": ids, "assistant_masks": mask})
    if rebuilt:
        log.info("sft: %d of %d episodes tokenized from their messages (no ids of this tokenizer)", rebuilt, len(out))
    return Dataset.from_list(out)


def episode_tokens(row: dict[str, Any], chat: ChatTokens) -> tuple[list[int], list[int], bool]:
    """(ids, policy mask, whether the recorded ids were used). The recorded ids when the episode's prompt ids are
    this chat template's for its prompt (the same tokenizer and settings sampled it); else, for an endpoint's episode
    or another tokenizer's, the ids the runner would have built: the prompt's, each answer's text closed by the
    end-of-turn token, each feedback as the template's delta after it (`azr.rollouts.ChatTokens`)."""
    messages, turns = row["messages"], row["turns"]
    first = next(i for i, m in enumerate(messages) if m.get("role") == "assistant")
    prompt = chat.prompt_ids(messages[:first])
    if row["prompt_ids"] and row["prompt_ids"] == prompt:
        last = max(k for k, t in enumerate(turns) if t["kind"] == "policy")  # later feedback was shown to no one
        ids, mask = list(prompt), [0] * len(prompt)
        for turn in turns[: last + 1]:
            ids += turn["ids"]
            mask += [int(turn["kind"] == "policy")] * len(turn["ids"])
        return ids, mask, True
    ids, mask = list(prompt), [0] * len(prompt)
    ended = [t.get("finish_reason") != "length" for t in turns if t["kind"] == "policy"]
    eos = chat.tokenizer.eos_token_id
    answers = [k for k, m in enumerate(messages) if m.get("role") == "assistant"]
    for n, k in enumerate(answers):
        assistant = {"role": "assistant", "content": str(messages[k].get("content") or "")}
        answer = chat.encode(assistant["content"]) + ([eos] if ended[n] and eos is not None else [])
        ids += answer
        mask += [1] * len(answer)
        if n + 1 < len(answers):
            delta, _ = chat.observation(assistant, messages[k + 1 : answers[n + 1]], ended[n])
            ids += delta
            mask += [0] * len(delta)
    return ids, mask, False


def find_near_misses(tasks: list[Task], grader, per_task: int, seed: int) -> dict[str, list[str]]:
    """Per task, up to `per_task` single-edit variants of its reference solution that fail its tests in the sandbox
    (variants that still pass, time out or break the sandbox are dropped). The same seed picks the same variants,
    as long as the sandbox gives the same verdicts."""
    from azr.rewards import grade_many

    rng = random.Random(seed)
    capped = [dataclasses.replace(t, timeout_s=min(t.timeout_s or NEAR_MISS_WALL_S, NEAR_MISS_WALL_S)) for t in tasks]
    tried = [(t, code) for t in capped if t.solution for code in sample_candidates(t.solution, rng, 3 * per_task)]
    limits = dataclasses.replace(grader.limits, wall_s=min(grader.limits.wall_s, NEAR_MISS_WALL_S))
    grades = grade_many(tried, grader.pool, limits) if tried else []
    found: dict[str, list[str]] = {}
    for (task, code), g in zip(tried, grades, strict=True):
        kept = found.setdefault(task.id, [])
        if g.status == "failed" and len(kept) < per_task:
            kept.append(code)
    return found


def near_misses_once(path: Path, find: Callable[[], dict[str, list[str]]]) -> dict[str, list[str]]:
    """The near misses in `path` if an earlier start of this warm start found them, else `find()`'s, saved there: a
    resumed warm start trains on the very rows it was checkpointed with, whatever the sandbox says this time."""
    if path.exists():
        return {str(k): list(v) for k, v in load_json(path.read_text()).items()}
    found = find()
    atomic_write_json(path, found)
    return found


def sft_phase(ctx: RunContext) -> None:
    """The warm start on `ctx`'s policy: reference answers (with near misses when `sft.near_misses`), recorded
    episodes (`sft.rollouts`), or in Absolute Zero mode its seed triplets; saved to `sft/final` and recorded."""
    from azr.models import build_peft_config

    cfg, out = ctx.cfg, ctx.out
    started = time.monotonic()
    near_misses = {}
    if cfg.sft.near_misses:
        find = functools.partial(find_near_misses, ctx.tasks, ctx.rewards.grader, cfg.sft.near_misses, cfg.seed)
        if ctx.ranks.main:
            near_misses = near_misses_once(out / "sft" / "near_misses.json", find)
        near_misses = ctx.ranks.broadcast(near_misses)  # every rank trains on the same rows
        log.info("sft: %d near misses that fail the tests added", sum(map(len, near_misses.values())))
    if cfg.mode == "absolute_zero":  # the warm start teaches both roles on seed triplets
        from azr.training.absolute_zero import warm_start_dataset

        dataset = warm_start_dataset(cfg, out, ctx.tasks, ctx.tokenizer, cfg.template_kwargs())
    elif cfg.sft.rollouts:
        from azr.tools import load_rollouts

        rows = load_rollouts(cfg.sft.rollouts, cfg.sft.rollouts_filter, cfg.rollouts.env)
        if environment_of(cfg).token_episodes:
            dataset = episode_dataset(rows, ctx.tokenizer, cfg.template_kwargs())
        else:
            dataset = rollout_dataset(rows)
    else:
        repairs = []
        if environment_of(cfg).feedback_turns and near_misses:  # a failed answer's feedback, and the fix
            from azr.training.episodes import repair_transcripts

            repairs = repair_transcripts(ctx.tasks, near_misses, ctx.rewards.grader, cfg.feedback)
            log.info("sft: %d repair transcripts (a near miss, its public tests' feedback, the fix)", len(repairs))
        dataset = sft_dataset(ctx.tasks, ctx.tokenizer, cfg.template_kwargs(), near_misses, repairs)
    # sft.full_weights: all weights train here, and GRPO's adapter starts fresh on them
    peft_config = None if cfg.sft.full_weights else build_peft_config(cfg.model.adapter, ctx.model)
    run_sft(
        ctx.model,
        ctx.tokenizer,
        dataset,
        ctx.args.sft,
        peft_config,
        ctx.callbacks("sft"),
        ctx.checkpoint("sft"),
        out / "sft" / "final",
    )
    ctx.state.finish("sft", {"seconds": round(time.monotonic() - started, 1), "examples": len(dataset)})
