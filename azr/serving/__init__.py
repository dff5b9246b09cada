"""Serving: the vLLM server azr launches beside a run (argv, environment, health, teardown with the run).
The face of the serving package; vLLM itself is never imported here.
"""

from azr.serving.vllm import VllmServer, VllmServerError, free_port, group_members

__all__ = [
    "VllmServer",
    "VllmServerError",
    "free_port",
    "group_members",
]
