"""Tools: python_run, web_search and web_fetch (behind an address guard), parsing tool calls, an endpoint as a
tool-using policy, and the rollouts file `azr gen` writes (the tool loop is an environment: `azr.envs.tools`; `azr
gen` is `azr.envs.gen`). The face of the tools package; it imports no torch, transformers or trl.
"""

from azr.tools.guard import AddressGuard, Refused, Target, Unresolvable, refusal, system_resolver
from azr.tools.parsing import ParsedTurn, ToolCall, assistant_message, call_from_wire, parse_lenient, parse_turn
from azr.tools.policy import EndpointPolicy, Sampling, wire_messages
from azr.tools.result import ToolResult, cap, neutralise
from azr.tools.rollouts import SCHEMA, load_rollouts, needs_redo, resume_state, summary
from azr.tools.toolbox import SCHEMAS, SPECS, Toolbox, ToolEvent, build_toolbox, secrets_from_env

__all__ = [
    "SCHEMA",
    "SCHEMAS",
    "SPECS",
    "AddressGuard",
    "EndpointPolicy",
    "ParsedTurn",
    "Refused",
    "Sampling",
    "Target",
    "ToolCall",
    "ToolEvent",
    "ToolResult",
    "Toolbox",
    "Unresolvable",
    "assistant_message",
    "build_toolbox",
    "call_from_wire",
    "cap",
    "load_rollouts",
    "needs_redo",
    "neutralise",
    "parse_lenient",
    "parse_turn",
    "refusal",
    "resume_state",
    "secrets_from_env",
    "summary",
    "system_resolver",
    "wire_messages",
]
