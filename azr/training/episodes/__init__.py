"""GRPO's rounds as episodes: TRL's `rollout_func` over any `azr.rollouts.Environment` (`rounds`), and what the two
multi-turn environments add to it, one module each: execution feedback (`feedback`: its columns, metrics per turn,
public-overfit alarm, per-turn pass rate and the warm start's repair transcripts) and the tool loop (`tools`). The
environment registry (`azr.config.environments`) names each kind's builder here.
"""

from azr.training.episodes.feedback import FeedbackRollout, feedback_rollouts, measure_episodes, repair_transcripts
from azr.training.episodes.rounds import (
    COMPLETION,
    EpisodeRollouts,
    ahead_playbook,
    assistant,
    episode_completions,
    play_asked,
)
from azr.training.episodes.tools import ToolRollout, check_template, tool_rollouts

__all__ = [
    "COMPLETION",
    "EpisodeRollouts",
    "FeedbackRollout",
    "ToolRollout",
    "ahead_playbook",
    "assistant",
    "check_template",
    "episode_completions",
    "feedback_rollouts",
    "measure_episodes",
    "play_asked",
    "repair_transcripts",
    "tool_rollouts",
]
