"""Tools: python_run, web_search and web_fetch (behind an address guard), parsing tool calls, the tool loop over a
local model or an endpoint, `azr gen` and its rollouts file. The face of the tools package; it imports no torch,
transformers or trl (the local policy loads them when it is built).
"""

from azr.tools.gen import build_policy, episode_seed, gen_settings, gen_tasks, run_gen, vllm_tool_args
from azr.tools.guard import AddressGuard, Refused, Target, Unresolvable, refusal, system_resolver
from azr.tools.loop import Episode, EpisodeLimits, assistant_message, run_episode
from azr.tools.parsing import ParsedTurn, ToolCall, parse_lenient, parse_turn
from azr.tools.policy import EndpointPolicy, LocalPolicy, Sampling, Turn, wire_messages
from azr.tools.result import ToolResult, cap, neutralise
from azr.tools.rollouts import SCHEMA, load_rollouts, needs_redo, resume_state, summary
from azr.tools.toolbox import SCHEMAS, SPECS, Toolbox, ToolEvent, build_toolbox, secrets_from_env

__all__ = [
    "SCHEMA",
    "SCHEMAS",
    "SPECS",
    "AddressGuard",
    "EndpointPolicy",
    "Episode",
    "EpisodeLimits",
    "LocalPolicy",
    "ParsedTurn",
    "Refused",
    "Sampling",
    "Target",
    "ToolCall",
    "ToolEvent",
    "ToolResult",
    "Toolbox",
    "Turn",
    "Unresolvable",
    "assistant_message",
    "build_policy",
    "build_toolbox",
    "cap",
    "episode_seed",
    "gen_settings",
    "gen_tasks",
    "load_rollouts",
    "needs_redo",
    "neutralise",
    "parse_lenient",
    "parse_turn",
    "refusal",
    "resume_state",
    "run_episode",
    "run_gen",
    "secrets_from_env",
    "summary",
    "system_resolver",
    "vllm_tool_args",
    "wire_messages",
]
