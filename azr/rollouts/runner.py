"""The one loop that runs any `Environment`: `run_groups` plays `sampling.n` episodes of each task with a token-level
sampler (every turn continues the episode's ids; observations join as the chat template's ids for them) and scores
them through the environment; `run_text` plays one with an endpoint (messages only), `play_replies` many with a
policy that answers many conversations in a call (messages only: an evaluation's sampler). Now (GRPO's round) or ahead
(the asynchronous pipeline schedules it: `azr.rollouts.ahead`). Finish reasons: `done` (unless the environment
names its own), `max_turns`, `max_tokens` (the episode's budget, or its completion's), `context` (the model's window)
or `error`.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from azr.rollouts.chat import ChatTokens
from azr.rollouts.environment import Environment, HasId
from azr.rollouts.episodes import ENV, POLICY, Episode, Message, Turn
from azr.rollouts.processes import OneProcess, Processes
from azr.rollouts.seam import Continuation, Reply, Sampling, TextPolicy, TokenSampler


@dataclass(frozen=True)
class Limits:
    """How long an episode may run: `max_turns` policy turns, `max_tokens` policy tokens over the whole episode
    (None: no budget but each turn's `sampling.max_new_tokens`), `max_context` the model's window (None: unbounded),
    `max_completion` the ids after the prompt, policy and environment alike (None: unbounded; GRPO's
    `max_completion_length`, the width of the trained row). An observation that would not fit is not shown."""

    max_turns: int = 1
    max_tokens: int | None = None
    max_context: int | None = None
    max_completion: int | None = None


def start_groups(
    env: Environment, tasks: Sequence[HasId], chat: ChatTokens | None, n: int, *, role: str = POLICY, version: int = 0
) -> list[list[Episode]]:
    """`n` fresh episodes of each task: the environment's first messages and, with `chat`, their ids (rendered once
    per task and shared by its group), tagged `version` until a sampler that knows its own tags the first turn."""
    groups = []
    for task in tasks:
        first = env.start(task)
        ids = chat.prompt_ids(first, env.tools) if chat is not None else []
        groups.append(
            [
                Episode(task.id, [dict(m) for m in first], list(ids), role=role, version=version, sample=k, task=task)
                for k in range(n)
            ]
        )
    return groups


def run_groups(
    env: Environment,
    tasks: Sequence[HasId],
    sampler: TokenSampler,
    chat: ChatTokens,
    sampling: Sampling,
    limits: Limits = Limits(),
    *,
    role: str = POLICY,
    score: bool = True,
) -> list[list[Episode]]:
    """`sampling.n` episodes of each task, in task order, every turn of every live episode sampled in one call per
    token budget (turn k drawn from `sampling.seed + k`), then scored through the environment."""
    groups = start_groups(env, tasks, chat, sampling.n, role=role)
    play(env, [e for group in groups for e in group], sampler, chat, sampling, limits)  # a group's rows in a row
    if score:
        env.score([e for group in groups for e in group])
    return groups


def play(
    env: Environment,
    episodes: list[Episode],
    sampler: TokenSampler,
    chat: ChatTokens,
    sampling: Sampling,
    limits: Limits = Limits(),
    processes: Processes = OneProcess(),
) -> None:
    """Run `episodes` (started, with prompt ids) to their end, turn by turn. On the first turn `sampling.n` says
    the episodes come in runs of `n` sharing one prompt (a group's, in TRL's layout; 1: no such runs). With several
    `processes` (a trainer's ranks, each playing its share), every process makes the same sampler calls with as
    many contexts each, as long as any has an episode going (`_agree`). An episode takes the policy version of the
    continuation that began it, where the sampler tags one."""
    live = [e for e in episodes if not e.done]
    filler = episodes[0].prompt_ids if episodes else []
    for index in range(limits.max_turns):
        batches: dict[int, list[Episode]] = defaultdict(list)
        for episode in live:
            budget = _budget(episode, sampling.max_new_tokens, limits)
            if budget > 0:
                batches[budget].append(episode)
        # `n` tells the sampler the contexts come in runs of n identical ones (a group's first turn, when every
        # episode of it is live and none was cut): a vLLM backend samples each run as one request.
        whole = index == 0 and len(live) == len(episodes) and all(b == [*live] for b in batches.values())
        calls = {budget: len(batch) for budget, batch in batches.items()}
        if processes.world > 1:
            calls, whole = _agree(processes, calls, whole)
        if not calls:
            return
        seed = None if sampling.seed is None else sampling.seed + index
        turn_sampling = replace(sampling, n=sampling.n if whole else 1, seed=seed)
        for budget, width in calls.items():
            batch = batches.get(budget, [])
            contexts = [e.context_ids for e in batch] + [filler] * (width - len(batch))
            outs = sampler.complete(contexts, replace(turn_sampling, max_new_tokens=budget))
            answered = [(e, out) for e, out in zip(batch, outs[: len(batch)], strict=True) if _take_turn(e, out)]
            shown = _respond_all(env, [(e, out.text) for e, out in answered])
            for (episode, out), observation in zip(answered, shown, strict=True):
                _show(env, episode, out, observation, chat, limits, last=index == limits.max_turns - 1)
        live = [e for e in live if not e.done]
    for episode in live:
        episode.finish_reason = "max_turns"


def _agree(processes: Processes, calls: dict[int, int], whole: bool) -> tuple[dict[int, int], bool]:
    """The sampler calls of a turn every process makes: one per token budget any process has episodes at, in
    one order, each as wide as the widest process's batch at it (the others fill theirs with a prompt and drop
    what it gives back). A trainer's generation gathers every process's contexts (TRL's vLLM modes, ZeRO-3's
    gathered weights), so a process that asked less, or nothing while another still plays, would hang the run or
    hand a process the continuations of another's contexts."""
    parts = processes.gather((calls, whole))
    widest: dict[int, int] = {}
    for part, _ in parts:
        for budget, width in part.items():
            widest[budget] = max(widest.get(budget, 0), width)
    return {budget: widest[budget] for budget in sorted(widest, reverse=True)}, all(w for _, w in parts)


def _budget(episode: Episode, per_turn: int, limits: Limits) -> int:
    """This turn's token budget; 0 ends the episode (its finish reason set)."""
    budget = per_turn
    if limits.max_tokens is not None:
        budget = min(budget, limits.max_tokens - episode.policy_tokens)
        if budget <= 0:
            episode.finish_reason = "max_tokens"
            return 0
    if limits.max_context is not None:
        budget = min(budget, limits.max_context - len(episode.context_ids))
        if budget <= 0:
            episode.finish_reason = "context"
            return 0
    if limits.max_completion is not None:
        budget = min(budget, limits.max_completion - len(episode.completion_ids))
        if budget <= 0:
            episode.finish_reason = "max_tokens"
            return 0
    return budget


def _take_turn(episode: Episode, out: Continuation) -> bool:
    """The policy's turn as sampled; False (the episode ended in `error`) when sampling failed."""
    assistant: Message = {"role": "assistant", "content": out.text}
    turn = Turn(
        POLICY,
        [assistant],
        list(out.ids),
        out.text,
        out.logprobs,
        out.raw,
        out.finish_reason,
        prompt_tokens=len(episode.context_ids),
    )
    if out.version is not None and not episode.policy_turns:
        episode.version = out.version  # the weights that drew its first turn (a later one may be drawn by newer ones)
    episode.turns.append(turn)
    if out.finish_reason == "error":
        episode.finish_reason = "error"
        return False
    return True


def _show(
    env: Environment,
    episode: Episode,
    out: Continuation,
    observation: list[Message] | None,
    chat: ChatTokens,
    limits: Limits,
    last: bool,
) -> None:
    """The environment's answer to a sampled turn, joined to the episode as the chat template's ids for it."""
    if _ended(episode, observation):
        return
    assert observation is not None
    if last:  # shown to no one: kept for the record, without ids
        episode.turns.append(Turn(ENV, list(observation)))
        episode.finish_reason = "max_turns"
        return
    ids, text = chat.observation(episode.turns[-1].message, observation, out.finish_reason == "stop", env.tools)
    if limits.max_completion is not None and len(episode.completion_ids) + len(ids) > limits.max_completion:
        episode.turns.append(Turn(ENV, list(observation)))  # it would not fit the row: shown to no one
        episode.finish_reason = "max_tokens"
        return
    episode.turns.append(Turn(ENV, list(observation), ids, text))


def _respond_all(env: Environment, turns: list[tuple[Episode, str]]) -> list[list[Message] | None]:
    """The environment's answers to one turn of many episodes: through its `respond_many` where it has one (the
    feedback environment runs all their public tests in one batch, side by side in its sandbox), else one by one."""
    many = getattr(env, "respond_many", None)
    if many is not None and turns:
        return list(many([e for e, _ in turns], [t for _, t in turns]))
    return [env.respond(episode, text) for episode, text in turns]


async def run_text(
    env: Environment,
    task: HasId,
    policy: TextPolicy,
    sampling: Sampling,
    limits: Limits = Limits(),
    *,
    sample: int = 0,
    role: str = POLICY,
    version: int = 0,
) -> Episode:
    """One episode with an endpoint policy (messages only; turn k asked with seed `sampling.seed + k`). Not scored:
    the caller scores it (`env.score([episode])`) where its grader may run. Never raises for anything the policy or
    the environment's tools do."""
    (episode,) = start_groups(env, [task], None, 1, role=role, version=version)[0]
    episode.sample = sample
    for index in range(limits.max_turns):
        budget = _budget(episode, sampling.max_new_tokens, limits)
        if budget <= 0:
            return episode
        reply: Reply = await policy.reply(episode.messages, env.tools, budget, sampling.seed + index)
        if not _take_reply(episode, reply):
            return episode
        # In a worker thread: an environment's tools may block (a web fetch), and endpoint episodes overlap.
        _observe(episode, await asyncio.to_thread(env.respond, episode, reply.text))
        if episode.done:
            return episode
    episode.finish_reason = "max_turns"
    return episode


def play_replies(
    env: Environment,
    episodes: list[Episode],
    reply: Callable[[list[Episode]], list[Reply]],
    limits: Limits = Limits(),
    processes: Processes = OneProcess(),
) -> None:
    """Run started `episodes` (messages only) to their end with a policy that answers many conversations in one
    call (an evaluation's sampler, its own token budget per turn): each turn `reply` answers every live episode,
    then the environment answers them (together, where it can: `_respond_all`). With several `processes` every one
    makes as many calls, each as wide as the widest process's (filled with a repeat whose reply is dropped): a model
    sharded over them needs every process in every forward."""
    live = [e for e in episodes if not e.done]
    for _ in range(limits.max_turns):
        width = max(processes.gather(len(live))) if processes.world > 1 else len(live)
        if not width:
            return
        filler = (live or episodes)[:1]
        replies = reply(live + filler * (width - len(live)))[: len(live)]
        answered = [(e, r) for e, r in zip(live, replies, strict=True) if _take_reply(e, r)]
        shown = _respond_all(env, [(e, r.text) for e, r in answered])
        for (episode, _), observation in zip(answered, shown, strict=True):
            _observe(episode, observation)
        live = [e for e in live if not e.done]
    for episode in live:
        episode.finish_reason = "max_turns"


def _take_reply(episode: Episode, reply: Reply) -> bool:
    """The policy's turn from an endpoint's reply; False (the episode ended in `error`) when the request failed."""
    if reply.error is not None:
        episode.finish_reason, episode.error = "error", reply.error
        return False
    turn = Turn(
        POLICY,
        [dict(reply.message)],
        text=reply.text,
        finish_reason=reply.finish_reason,
        tokens=reply.completion_tokens,
        prompt_tokens=reply.prompt_tokens,
    )
    episode.turns.append(turn)
    return True


def _observe(episode: Episode, observation: list[Message] | None) -> None:
    """What the environment answered a message-only turn: kept as its turn (without ids), or the episode done."""
    if not _ended(episode, observation):
        episode.turns.append(Turn(ENV, list(observation or [])))


def _ended(episode: Episode, observation: list[Message] | None) -> bool:
    """Whether the environment's answer ended the episode: it named its own reason (what it answered is kept for the
    record, without ids), or it answered nothing (`done`)."""
    if episode.done:
        if observation:
            episode.turns.append(Turn(ENV, list(observation)))
        return True
    if observation is None:
        episode.finish_reason = "done"
        return True
    return False
