"""One rank of `test_ranks_play.py`: plays its share of episodes through `azr.rollouts.play` with the run's real
`Ranks` (torchrun's gloo group) and a sampler that gathers contexts as TRL's vLLM server mode does, then writes what
it saw to `OUT/rank-N.json`. Rank 1's episodes take `turns` answers, rank 0's one: the ranks' turns are uneven.

Usage: torchrun --standalone --nproc_per_node 2 ranks_play.py MODEL_DIR OUT TURNS
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import torch.distributed
from accelerate.utils import gather_object
from transformers import AutoTokenizer

from azr.rollouts import ChatTokens, Limits, Sampling, continuation, play, start_groups
from azr.training.ranks import start_ranks


@dataclass(frozen=True)
class Task:
    id: str
    prompt: str


class Uneven:
    """Asks for another answer until an episode has `turns` of them."""

    tools = None

    def __init__(self, turns: int):
        self.turns = turns

    def start(self, task: Task) -> list[dict]:
        return [{"role": "user", "content": task.prompt}]

    def respond(self, episode, text: str):
        if len(episode.policy_turns) >= self.turns:
            return None
        return [{"role": "user", "content": "again"}]

    def score(self, episodes) -> None:
        for episode in episodes:
            episode.reward = 0.0


def said(context: list[int]) -> str:
    """What the sampler answers to `context`: a digest of it, so that an answer shows which context it was for."""
    return f"n{len(context)}s{sum(context) % 9973}"


class GatheringSampler:
    """TRL's server mode in miniature: every rank's contexts gathered, all answered, each rank taking the slice at
    its index times its own count (so every rank must ask as many, every call)."""

    def __init__(self, tokenizer, rank: int):
        self.tokenizer, self.rank, self.calls = tokenizer, rank, []

    def complete(self, contexts, sampling):
        everyone = gather_object([list(c) for c in contexts])
        self.calls.append(len(contexts))
        mine = everyone[self.rank * len(contexts) : (self.rank + 1) * len(contexts)]
        eos = self.tokenizer.eos_token_id
        out = []
        for context in mine:
            ids = self.tokenizer(said(context), add_special_tokens=False)["input_ids"] + [eos]
            out.append(continuation(self.tokenizer, ids, {eos}, [0.0] * len(ids)))
        return out


def main() -> None:
    model_dir, out, turns = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    ranks = start_ranks()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    env = Uneven(turns if ranks.rank == 1 else 1)
    chat = ChatTokens(tokenizer)
    tasks = [Task(f"r{ranks.rank}t{i}", f"Task {i} of rank {ranks.rank}.") for i in range(2)]
    groups = start_groups(env, tasks, chat, 2)
    episodes = [e for group in groups for e in group]
    sampler = GatheringSampler(tokenizer, ranks.rank)
    play(env, episodes, sampler, chat, Sampling(n=2, max_new_tokens=16), Limits(max_turns=turns), ranks)
    seen = []
    for episode in episodes:
        context = list(episode.prompt_ids)
        for turn in episode.turns:
            if turn.kind == "policy":
                seen.append({"wanted": said(context), "got": turn.text, "task": episode.task_id})
            context += turn.ids
    record = {"calls": sampler.calls, "turns": [len(e.policy_turns) for e in episodes], "answers": seen}
    (out / f"rank-{ranks.rank}.json").write_text(json.dumps(record))
    ranks.wait()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
