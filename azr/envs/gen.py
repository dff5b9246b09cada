"""`azr gen`: episodes over a task set in the tool environment, or the feedback one (`rollouts.env: feedback`: each
turn's kind and token ids kept), one JSON line each, the final answer graded. Tasks, settings and resume state are
checked before the model loads; the policy (local model, endpoint, or a vLLM server started here) plays through the
episode runner (a local model continues each episode's ids); each episode is scored through the run's rubric and
appended, flushed line by line. `--resume` skips what is done and redoes what the policy or the sandbox failed.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import zlib
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from azr.config import FEEDBACK, TOOLS, AzrConfig, check_hidden_tests, gen_environment_of
from azr.data import Task, check_task_limits, load_tasks
from azr.envs.feedback import PUBLIC, FeedbackEnvironment
from azr.envs.task import TaskPrompt
from azr.envs.tools import ToolEnvironment, events_of, turn_parser
from azr.logs import JsonlWriter, read_jsonl_records
from azr.rewards import Rubric, recipe_rubric, with_shaping
from azr.rollouts import (
    ENV,
    POLICY,
    ChatTokens,
    Episode,
    GenerateSampler,
    Limits,
    TextPolicy,
    play,
    run_text,
    start_groups,
)
from azr.rollouts import Sampling as RolloutSampling
from azr.secrets import public_url, redact_data
from azr.tools import SCHEMA, EndpointPolicy, Sampling, build_toolbox, parse_turn, resume_state, summary

if TYPE_CHECKING:
    from azr.rollouts import Policy

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
        rubric = with_shaping(cfg, recipe_rubric(cfg, cfg.sandbox))  # a feedback episode's rewards are GRPO's
        with ExitStack() as stack:
            policy = build_policy(cfg, kind, stack)
            env = gen_environment(cfg, policy, rubric)
            existed = out.exists()
            writer = stack.enter_context(JsonlWriter(out))
            try:
                collector = _Collector(cfg, settings, policy, env, writer)
                failed = asyncio.run(collector.run(todo))
            finally:  # a run that wrote nothing leaves no empty file behind to be mistaken for a result
                if not existed and out.exists() and out.stat().st_size == 0:
                    out.unlink()
    from azr.envs.console import show_summary

    show_summary(summary(read_jsonl_records(out)) if out.exists() else summary([]), out, cfg.logging.console)
    if failed:
        log.error("gen: %d episodes failed (policy or sandbox errors); run again with --resume to redo them", failed)
    return 1 if failed else 0


def gen_tasks(cfg: AzrConfig) -> list[Task]:
    """The tasks episodes run on; with execution feedback only those with a hidden test to score on (ConfigError,
    naming `rollouts.env`, when none has one)."""
    source = cfg.gen.tasks or cfg.data.train
    data = cfg.data
    tasks = load_tasks(
        source, data.column_map, data.format, data.compare, data.float_tol, public_tests=data.public_tests
    )
    check_task_limits(tasks, cfg.sandbox.max_task_timeout_s, cfg.sandbox.max_task_memory_mb, str(source))
    if gen_environment_of(cfg).hidden_tests:
        check_hidden_tests(tasks, "rollouts.env", str(source), data.public_tests)
        kept = [t for t in tasks if t.split_tests()[1]]
        if len(kept) < len(tasks):
            log.info(
                "gen: %d tasks without a hidden test left out (feedback scores on hidden tests)", len(tasks) - len(kept)
            )
        tasks = kept
    return tasks[: cfg.gen.max_tasks] if cfg.gen.max_tasks else tasks


def gen_environment(
    cfg: AzrConfig, policy: LocalModel | TextPolicy, rubric: Rubric
) -> ToolEnvironment | FeedbackEnvironment:
    """The environment `rollouts.env` names: execution feedback (`feedback:`), or the tool loop (`tools:`, `gen:`)."""
    grader = rubric.grader
    assert grader is not None  # built over cfg.sandbox
    if not gen_environment_of(cfg).tools:
        return FeedbackEnvironment(grader, cfg.feedback, rubric)
    toolbox = build_toolbox(cfg, grader.pool, policy.control_tokens)
    parse = policy.parser(toolbox.schemas()) if isinstance(policy, LocalModel) else parse_turn
    return ToolEnvironment(toolbox, rubric, cfg.gen.max_turns, cfg.gen.max_tool_calls, parse)


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
    env = gen_environment_of(cfg)
    if env.feedback_turns:  # no tools; what is shown, and which tests are public, decide the episodes
        fb = cfg.feedback
        del sampling["max_tool_calls"]
        sampling |= {
            "max_turns": fb.max_turns,
            "tools": [],
            "env": env.name,
            "feedback": {"max_failures": fb.max_failures, "max_chars": fb.max_chars, "stop_on_pass": fb.stop_on_pass},
            "public_tests": cfg.data.public_tests,
        }
    return {"model": model, "sampling": sampling}


@dataclass
class LocalModel:
    """A transformers model played at the token level: its generate sampler, its chat template as episode ids, and
    its context window. One episode generates at a time (`lock`)."""

    sampler: GenerateSampler
    chat: ChatTokens
    max_context: int | None
    name: str
    kind: str = "local"

    def __post_init__(self) -> None:
        self.lock = threading.Lock()

    @property
    def control_tokens(self) -> list[str]:
        return list(self.sampler.tokenizer.all_special_tokens)

    def parser(self, schemas: list[dict]):
        """How a turn of this model is read (`azr.envs.tools.turn_parser`)."""
        return turn_parser(self.chat, schemas)

    def sampling(self, gen_temperature: float, top_p: float, max_new_tokens: int, seed: int) -> RolloutSampling:
        """A turn's sampling: the episode's temperature and top_p, no top-k cut, the model's own min_p and
        repetition penalty, turn k drawn from `seed + k`."""
        config = getattr(self.sampler.model, "generation_config", None)
        return RolloutSampling(
            n=1,
            max_new_tokens=max_new_tokens,
            temperature=gen_temperature,
            top_p=top_p,
            top_k=0,
            min_p=getattr(config, "min_p", None),
            repetition_penalty=getattr(config, "repetition_penalty", None) or 1.0,
            batch_size=1,
            seed=seed,
        )


def build_policy(cfg: AzrConfig, kind: str, stack: ExitStack) -> LocalModel | TextPolicy:
    gen, sampling = cfg.gen, Sampling(cfg.gen.temperature, cfg.gen.top_p)
    if kind == "endpoint":
        from azr.remote import ChatClient

        client = ChatClient.from_config(gen.endpoint)
        return EndpointPolicy(client, sampling, gen.endpoint.model)
    if kind == "vllm":
        from azr.remote import ChatClient
        from azr.serving import serve_model

        tool_args = [a for a in vllm_tool_args(cfg.vllm.extra_args) if a not in cfg.vllm.extra_args]
        if not gen_environment_of(cfg).tools:  # feedback episodes offer no tools
            tool_args = []
        endpoint = stack.enter_context(serve_model(cfg.vllm, cfg.model, gen.adapter, extra_args=tool_args))
        client = ChatClient(
            endpoint.base_url, endpoint.model, concurrency=gen.concurrency, timeout_s=cfg.vllm.request_timeout_s
        )
        return EndpointPolicy(client, sampling, cfg.model.name_or_path)
    return _local_model(cfg)


def vllm_tool_args(extra_args: list[str]) -> list[str]:
    """The vLLM server's arguments with tool calling on (Hermes-style <tool_call> parsing unless the recipe picks
    another parser)."""
    args = list(extra_args)
    if "--enable-auto-tool-choice" not in args:
        args.append("--enable-auto-tool-choice")
    if not any(a.startswith("--tool-call-parser") for a in args):
        args += ["--tool-call-parser", "hermes"]
    return args


def _local_model(cfg: AzrConfig) -> LocalModel:
    from azr.models import load_policy, quiet_third_party

    quiet_third_party()
    model, tokenizer = load_policy(cfg.model, cfg.gen.adapter or None, flag="gen.adapter:")
    return local_model(model, tokenizer, cfg.template_kwargs(), cfg.model.name_or_path)


def local_model(model: Policy, tokenizer: Any, template_kwargs: dict, name: str) -> LocalModel:
    window = int(getattr(model.config, "max_position_embeddings", 0) or 0) or None
    return LocalModel(GenerateSampler(model, tokenizer), ChatTokens(tokenizer, template_kwargs), window, name)


def episode_seed(seed: int, task_id: str, sample: int) -> int:
    """One seed per episode: the samples of a task differ, and a resumed run redraws the same ones."""
    return zlib.crc32(f"{seed}:{task_id}:{sample}".encode())


class _Collector:
    """Runs the episodes, scores each through the environment's rubric and writes its record, with a progress bar."""

    def __init__(
        self,
        cfg: AzrConfig,
        settings: dict,
        policy: LocalModel | TextPolicy,
        env: ToolEnvironment | FeedbackEnvironment,
        writer,
    ):
        self.cfg, self.settings, self.policy, self.env, self.writer = cfg, settings, policy, env, writer
        self.kind = gen_environment_of(cfg)
        self.max_turns = self.kind.max_turns(cfg)
        self.limits = Limits(self.max_turns, cfg.gen.max_tokens)
        self.failed = 0

    async def run(self, todo: list[tuple[Task, int]]) -> int:
        from azr.envs.console import progress

        semaphore, grading = asyncio.Semaphore(self.cfg.gen.concurrency), asyncio.Lock()
        with progress(len(todo), self.cfg.logging.console) as advance:

            async def one(task: Task, sample: int) -> None:
                async with semaphore:
                    started = time.monotonic()
                    seed = episode_seed(self.cfg.seed, task.id, sample)
                    episode = await self._play(TaskPrompt.of(task), sample, seed)
                    async with grading:  # the grader's batch cache and details belong to one batch at a time
                        await asyncio.to_thread(self.env.score, [episode])
                grade = episode.info["grade"]
                assert isinstance(grade, dict)
                self.writer.write(self._record(task, sample, seed, episode, time.monotonic() - started))
                self.failed += episode.finish_reason == "error" or grade.get("status") == "error"
                advance(bool(grade.get("passed")))

            await asyncio.gather(*(one(t, s) for t, s in todo))
        return self.failed

    async def _play(self, task: TaskPrompt, sample: int, seed: int) -> Episode:
        g, policy = self.cfg.gen, self.policy
        if isinstance(policy, LocalModel):
            sampling = policy.sampling(g.temperature, g.top_p, g.max_new_tokens, seed)
            limits = Limits(self.max_turns, g.max_tokens, policy.max_context)

            def local() -> Episode:
                (episode,) = start_groups(self.env, [task], policy.chat, 1)[0]
                episode.sample = sample
                with policy.lock:
                    play(self.env, [episode], policy.sampler, policy.chat, sampling, limits)
                return episode

            return await asyncio.to_thread(local)
        sampling = RolloutSampling(n=1, max_new_tokens=g.max_new_tokens, seed=seed)
        return await run_text(self.env, task, policy, sampling, self.limits, sample=sample)

    def _record(self, task: Task, sample: int, seed: int, episode: Episode, seconds: float) -> dict[str, Any]:
        head = {
            "schema": SCHEMA,
            "id": f"{task.id}#{sample}",
            "task_id": task.id,
            "sample": sample,
            "seed": seed,
            **self.settings,
        }
        tail = {"grade": episode.info["grade"], "rewards": episode.rewards, "duration_s": round(seconds, 3)}
        tail["time"] = round(time.time(), 3)
        if not self.kind.tools:
            return feedback_record(head, episode, tail)
        assert isinstance(self.env, ToolEnvironment)
        events = events_of(episode)
        usage = episode.usage()
        # Tool output is redacted already; this also covers what the model itself wrote (a key in a call's arguments).
        return self.env.toolbox.redact(
            {
                **head,
                "env": TOOLS.name,
                "tools": self.env.tools,
                "messages": episode.messages,
                "tool_events": [e.to_dict() for e in events],
                "finish_reason": episode.finish_reason,
                "error": episode.error,
                "usage": {
                    "prompt_tokens": usage["prompt_tokens"],
                    "completion_tokens": usage["completion_tokens"],
                    "turns": usage["turns"],
                    "tool_calls": len(events),
                },
                **tail,
            }
        )


def feedback_record(head: dict[str, Any], episode: Episode, tail: dict[str, Any]) -> dict[str, Any]:
    """A feedback episode's record: the conversation, the prompt's ids and each turn (`episode_turns`), redacted. A
    record that redaction changed keeps no ids (they would still spell what was redacted); SFT then tokenizes it
    from its messages."""
    usage = episode.usage()
    record = {
        **head,
        "env": FEEDBACK.name,
        "tools": [],
        "messages": episode.messages,
        "prompt_ids": list(episode.prompt_ids),
        "turns": episode_turns(episode),
        "tool_events": [],
        "finish_reason": episode.finish_reason,
        "error": episode.error,
        "usage": {**usage, "tool_calls": 0},
        **tail,
    }
    redacted = redact_data(record)
    if redacted != record:
        log.warning("gen: %s: a secret was redacted from the episode; its token ids are not kept", head["id"])
        redacted["prompt_ids"] = []
        for turn in redacted["turns"]:
            turn["ids"] = []
    return redacted


def episode_turns(episode: Episode) -> list[dict[str, Any]]:
    """Each turn in order: its `kind` (policy / env) and token ids (empty for an endpoint's); a policy turn's `text`,
    `finish_reason` and verdict on the public tests (`public`: passed, fraction); an environment turn's `content` (the
    feedback) and whether the policy was shown it (`shown`: the last observation of an episode cut at its turn limit
    was not)."""
    out: list[dict[str, Any]] = []
    for k, turn in enumerate(episode.turns):
        if turn.kind == POLICY:
            check = turn.info.get(PUBLIC)
            public = {"passed": check["passed"], "fraction": check["fraction"]} if isinstance(check, dict) else None
            out.append(
                {
                    "kind": POLICY,
                    "text": turn.text,
                    "ids": list(turn.ids),
                    "finish_reason": turn.finish_reason,
                    "public": public,
                }
            )
        else:
            content = "\n".join(str(m.get("content") or "") for m in turn.messages)
            shown = k + 1 < len(episode.turns)
            out.append({"kind": ENV, "content": content, "ids": list(turn.ids), "shown": shown})
    return out
