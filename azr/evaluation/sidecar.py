"""`azr eval --vllm`: a local model (with its adapter served as LoRA) sampled through a vLLM server azr starts for
the evaluation and stops after it.

Owns only the lifetime around `azr.serving.serve_model`; the requests, seeds and replies are the endpoint's
(`azr.evaluation.samplers.endpoint_draws`), so the samples, their modes and the report are those of any endpoint
evaluation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from pathlib import Path

from azr.config import ModelConfig, VllmConfig
from azr.evaluation.measure import Sampling
from azr.evaluation.samplers import Draws, EndpointSpec, endpoint_draws
from azr.serving import serve_model

log = logging.getLogger(__name__)


def sidecar_draws(
    vllm: VllmConfig,
    model: ModelConfig,
    adapter: str | None,
    sampling: Sampling,
    template_kwargs: dict,
    log_path: Path | None = None,
) -> Draws:
    """An endpoint's draws over a vLLM server started here on `model` (and `adapter`): a server that died says so,
    with its log, before the next call instead of failing its requests one by one; `close()` stops it."""
    if model.quantization != "none":
        log.warning("eval --vllm: vLLM serves %s unquantized (model.quantization ignored)", model.name_or_path)
    stack = contextlib.ExitStack()
    endpoint = stack.enter_context(
        serve_model(vllm, model, adapter, template_kwargs=template_kwargs or None, log_path=log_path)
    )
    # One request per sample, as many in flight as the server batches at once.
    concurrency = batched_sequences(vllm.extra_args)
    spec = EndpointSpec(
        endpoint.base_url, endpoint.model, "chat", concurrency=concurrency, timeout_s=vllm.request_timeout_s
    )
    return dataclasses.replace(endpoint_draws(spec, sampling), check=endpoint.server.check_alive, close=stack.close)


DEFAULT_IN_FLIGHT = 8


def batched_sequences(extra_args: list[str]) -> int:
    """How many sequences the server batches at once: its `--max-num-seqs` among `vllm.extra_args` (either
    `--max-num-seqs N` or `--max-num-seqs=N`), else 8."""
    for i, arg in enumerate(extra_args):
        value = arg.split("=", 1)[1] if arg.startswith("--max-num-seqs=") else None
        if arg == "--max-num-seqs" and i + 1 < len(extra_args):
            value = extra_args[i + 1]
        if value is not None and value.isdigit() and int(value) > 0:
            return int(value)
    return DEFAULT_IN_FLIGHT
