"""`azr gen`: tool-using episodes over a task set, each final answer graded, one JSON line per episode.

The linear recipe: tasks, settings and resume state (all checked before the model loads), rewards and sandbox, the
policy (local model, endpoint, or a vLLM server started here with tool calling on), the toolbox; then the episodes,
`gen.concurrency` at a time, each graded with the training answer format and rewards as it finishes and appended to
the file (flushed line by line, so a kill loses at most the episodes in flight). `--resume` skips the (task, sample)
pairs already in the file and redoes those the policy or the sandbox failed. Ends with a summary table; exit 1 when
some episodes failed for the policy's or the sandbox's sake (run again with --resume).
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from azr.config import AzrConfig
from azr.data import Task, check_task_limits, load_tasks
from azr.logs import JsonlWriter, read_jsonl_records
from azr.prompts import chat_messages
from azr.rewards import Rubric, build_rubric
from azr.secrets import public_url
from azr.tools.loop import Episode, EpisodeLimits, run_episode
from azr.tools.policy import EndpointPolicy, LocalPolicy, Sampling
from azr.tools.rollouts import SCHEMA, resume_state, summary
from azr.tools.toolbox import Toolbox, build_toolbox

log = logging.getLogger(__name__)
VLLM_TOOL_ARGS = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]


def run_gen(cfg: AzrConfig, out: Path, resume: bool = False, vllm: bool = False) -> int:
    """Collect episodes as `cfg.gen` says into `out`; returns the exit code."""
    kind = "vllm" if vllm else cfg.gen.policy
    tasks = gen_tasks(cfg)
    settings = gen_settings(cfg, kind)
    done = resume_state(out, settings, resume)
    todo = [(t, s) for t in tasks for s in range(cfg.gen.samples) if (t.id, s) not in done]
    log.info(
        "gen: %d tasks x %d samples; %d episodes to run (%d done)", len(tasks), cfg.gen.samples, len(todo), len(done)
    )
    failed = 0
    if todo:
        rubric = build_rubric(cfg.rewards, cfg.sandbox, answer_format=cfg.answer_format)
        grader = rubric.grader
        assert grader is not None  # built over cfg.sandbox
        with ExitStack() as stack:
            policy = build_policy(cfg, kind, stack)
            toolbox = build_toolbox(cfg, grader.pool, policy.control_tokens)
            existed = out.exists()
            writer = stack.enter_context(JsonlWriter(out))
            try:
                collector = _Collector(cfg, settings, policy, toolbox, rubric, writer)
                failed = asyncio.run(collector.run(todo))
            finally:  # a run that wrote nothing leaves no empty file behind to be mistaken for a result
                if not existed and out.exists() and out.stat().st_size == 0:
                    out.unlink()
    from azr.tools.console import show_summary

    show_summary(summary(read_jsonl_records(out)) if out.exists() else summary([]), out, cfg.logging.console)
    if failed:
        log.error("gen: %d episodes failed (policy or sandbox errors); run again with --resume to redo them", failed)
    return 1 if failed else 0


def gen_tasks(cfg: AzrConfig) -> list[Task]:
    source = cfg.gen.tasks or cfg.data.train
    data = cfg.data
    tasks = load_tasks(source, data.column_map, data.format, data.compare, data.float_tol)
    check_task_limits(tasks, cfg.sandbox.max_task_timeout_s, cfg.sandbox.max_task_memory_mb, str(source))
    return tasks[: cfg.gen.max_tasks] if cfg.gen.max_tasks else tasks


def gen_settings(cfg: AzrConfig, kind: str) -> dict[str, Any]:
    """What produced the episodes; a resumed file must have been written with the same."""
    gen = cfg.gen
    name = gen.endpoint.model if kind == "endpoint" else cfg.model.name_or_path
    model = {"policy": kind, "name": name, "adapter": gen.adapter if kind in ("local", "vllm") else None}
    if kind == "endpoint":
        model["base_url"] = public_url(gen.endpoint.base_url)  # stored without its credentials
    sampling = {
        "temperature": gen.temperature,
        "top_p": gen.top_p,
        "max_turns": gen.max_turns,
        "max_tool_calls": gen.max_tool_calls,
        "max_tokens": gen.max_tokens,
        "max_new_tokens": gen.max_new_tokens,
        "seed": cfg.seed,
        "chat_template_kwargs": cfg.template_kwargs(),
        "answer_format": cfg.answer_format,
        "tools": list(cfg.tools.names),
    }
    return {"model": model, "sampling": sampling}


def build_policy(cfg: AzrConfig, kind: str, stack: ExitStack) -> Any:
    gen, sampling = cfg.gen, Sampling(cfg.gen.temperature, cfg.gen.top_p)
    if kind == "endpoint":
        from azr.remote import ChatClient

        client = ChatClient.from_config(gen.endpoint)
        return EndpointPolicy(client, sampling, gen.endpoint.model)
    if kind == "vllm":
        from azr.remote import ChatClient
        from azr.serving import serve_model

        tool_args = [a for a in vllm_tool_args(cfg.vllm.extra_args) if a not in cfg.vllm.extra_args]
        endpoint = stack.enter_context(serve_model(cfg.vllm, cfg.model, gen.adapter, extra_args=tool_args))
        client = ChatClient(
            endpoint.base_url, endpoint.model, concurrency=gen.concurrency, timeout_s=cfg.vllm.request_timeout_s
        )
        return EndpointPolicy(client, sampling, cfg.model.name_or_path)
    return _local_policy(cfg, sampling)


def vllm_tool_args(extra_args: list[str]) -> list[str]:
    """The vLLM server's arguments with tool calling on (Hermes-style <tool_call> parsing unless the recipe picks
    another parser)."""
    args = list(extra_args)
    if "--enable-auto-tool-choice" not in args:
        args.append("--enable-auto-tool-choice")
    if not any(a.startswith("--tool-call-parser") for a in args):
        args += ["--tool-call-parser", "hermes"]
    return args


def _local_policy(cfg: AzrConfig, sampling: Sampling) -> LocalPolicy:
    from azr.models import build_model_and_tokenizer, quiet_third_party, read_adapter_config

    quiet_third_party()
    adapter = cfg.gen.adapter
    if adapter:
        read_adapter_config(adapter, "gen.adapter:")
    model, tokenizer = build_model_and_tokenizer(cfg.model)
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter)
    return LocalPolicy(model, tokenizer, sampling, cfg.template_kwargs(), cfg.model.name_or_path)


def episode_seed(seed: int, task_id: str, sample: int) -> int:
    """One seed per episode: the samples of a task differ, and a resumed run redraws the same ones."""
    return zlib.crc32(f"{seed}:{task_id}:{sample}".encode())


class _Collector:
    """Runs the episodes, grades each answer and writes its record, with a progress bar."""

    def __init__(self, cfg: AzrConfig, settings: dict, policy: Any, toolbox: Toolbox, rubric: Rubric, writer):
        self.cfg, self.settings, self.policy, self.toolbox, self.writer = cfg, settings, policy, toolbox, writer
        assert rubric.grader is not None  # built to score
        self.rubric, self.grader = rubric, rubric.grader
        g = cfg.gen
        self.limits = EpisodeLimits(g.max_turns, g.max_tool_calls, g.max_tokens, g.max_new_tokens)
        self.failed = 0

    async def run(self, todo: list[tuple[Task, int]]) -> int:
        from azr.tools.console import progress

        semaphore, grading = asyncio.Semaphore(self.cfg.gen.concurrency), asyncio.Lock()
        with progress(len(todo), self.cfg.logging.console) as advance:

            async def one(task: Task, sample: int) -> None:
                async with semaphore:
                    started = time.monotonic()
                    seed = episode_seed(self.cfg.seed, task.id, sample)
                    episode = await run_episode(
                        self.policy, self.toolbox, chat_messages(task.prompt), self.limits, seed
                    )
                    async with grading:  # the grader's batch cache and details belong to one batch at a time
                        grade, rewards = await asyncio.to_thread(self._grade, task, episode)
                record = self._record(task, sample, seed, episode, grade, rewards, time.monotonic() - started)
                self.writer.write(record)
                self.failed += episode.finish_reason == "error" or grade.get("status") == "error"
                advance(bool(grade.get("passed")))

            await asyncio.gather(*(one(t, s) for t, s in todo))
        return self.failed

    def _grade(self, task: Task, episode: Episode) -> tuple[dict[str, Any], dict[str, float | None]]:
        if episode.finish_reason == "error":
            return {"status": "not_graded", "passed": False, "reason": "the episode failed"}, {}
        columns = {key: [value] for key, value in task.grading_columns().items()} | {"task_id": [task.id]}
        outcome = self.grader.outcomes([episode.answer], columns)[0]
        details = outcome.details()
        values = [f(prompts=[None], completions=[episode.answer], **columns)[0] for f in self.rubric.funcs]
        rewards = dict(zip(self.rubric.names, values, strict=True))
        total = self.rubric.total(values)
        total = None if total is None else round(total, 6)
        grade = {"status": details["status"], "passed": details["status"] == "passed", **details}
        return {k: v for k, v in grade.items() if k != "per_test"}, {**rewards, "total": total}

    def _record(self, task, sample, seed, episode: Episode, grade, rewards, seconds: float) -> dict[str, Any]:
        # Tool output is redacted already; this also covers what the model itself wrote (a key in a call's arguments).
        return self.toolbox.redact(
            {
                "schema": SCHEMA,
                "id": f"{task.id}#{sample}",
                "task_id": task.id,
                "sample": sample,
                "seed": seed,
                **self.settings,
                "tools": self.toolbox.schemas(),
                "messages": episode.messages,
                "tool_events": [e.to_dict() for e in episode.events],
                "finish_reason": episode.finish_reason,
                "error": episode.error,
                "usage": episode.usage(),
                "grade": grade,
                "rewards": rewards,
                "duration_s": round(seconds, 3),
                "time": round(time.time(), 3),
            }
        )
