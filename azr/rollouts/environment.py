"""What an environment is to the runner: it starts an episode from a task (the first messages), answers each policy
turn (the next observation's messages, or None when the episode is done) and scores whole episodes through its one
`Rubric`. It never samples and never tokenizes: the runner does both, so one environment serves a token-level policy
(trained) and an endpoint policy (messages only) alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from azr.rollouts.episodes import Episode, Message


class HasId(Protocol):
    """A task as the runner needs it: an id (data's `Task`, Absolute Zero's slots, a test's script)."""

    @property
    def id(self) -> str: ...


TaskT = TypeVar("TaskT", bound=HasId, contravariant=True)


class Environment(Protocol[TaskT]):
    """An episode's world. `tools`: the tool schemas the chat template renders for every turn (None: no tools).

    `respond` sees the episode with the policy's new turn as its last (`episode.turns[-1]`: its ids, text and the
    assistant message, which the environment may refine, e.g. with the tool calls it parsed) and may record
    verdicts in that turn's `info`, the episode's `info` and its own per-episode `state`. Returning None ends the
    episode (`finish_reason` "done"); an observation is shown to the policy for its next turn. An environment may
    also answer one turn of many episodes at once, `respond_many(episodes, texts)` (the same answers, in order),
    which the runner then calls instead (the feedback environment runs their tests side by side). `score` sets each
    episode's `rewards` and `reward`, and never raises for anything the policy wrote."""

    @property
    def tools(self) -> list[dict] | None: ...

    def start(self, task: TaskT) -> list[Message]: ...

    def respond(self, episode: Episode, text: str) -> list[Message] | None: ...

    def score(self, episodes: Sequence[Episode]) -> None: ...
