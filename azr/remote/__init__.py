"""Remote models: OpenAI-compatible and Responses clients with retries, a circuit breaker and secret redaction.
The face of the remote package.
"""

from azr.remote.clients import ChatClient, Reply, ResponsesClient, Usage, UsageTotals, build_client
from azr.remote.resilience import CircuitBreaker, Secret, redact

__all__ = [
    "ChatClient",
    "CircuitBreaker",
    "Reply",
    "ResponsesClient",
    "Secret",
    "Usage",
    "UsageTotals",
    "build_client",
    "redact",
]
