"""Self-play: a remote opponent on each batch, teacher hints, the scoreboard and frontier, and whole-group replay.
The face of the self-play package.
"""

from azr.selfplay.arena import Arena
from azr.selfplay.opponent import SelfPlayManager, opponent_messages, opponent_params
from azr.selfplay.scoreboard import Frontier, Scoreboard
from azr.selfplay.teacher import TeacherAssistant, sanitise_hint, teacher_params

__all__ = [
    "Arena",
    "Frontier",
    "Scoreboard",
    "SelfPlayManager",
    "TeacherAssistant",
    "opponent_messages",
    "opponent_params",
    "sanitise_hint",
    "teacher_params",
]
