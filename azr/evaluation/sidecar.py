"""`azr eval --vllm`: a local model (with its adapter served as LoRA) sampled through a vLLM server azr starts for
the evaluation and stops after it.

Owns only the lifetime around `azr.serving.serve_model`; the requests, seeds and replies are the endpoint sampler's,
so the samples, their modes and the report are those of any endpoint evaluation.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from azr.config import ModelConfig, VllmConfig
from azr.evaluation.measure import Sampling
from azr.evaluation.samplers import EndpointSampler, EndpointSpec
from azr.serving import serve_model

log = logging.getLogger(__name__)


class SidecarSampler:
    """An EndpointSampler over a vLLM server on `model` (and `adapter`); `close()` stops the server."""

    def __init__(
        self,
        vllm: VllmConfig,
        model: ModelConfig,
        adapter: str | None,
        sampling: Sampling,
        template_kwargs: dict,
        log_path: Path | None = None,
    ):
        if model.quantization != "none":
            log.warning("eval --vllm: vLLM serves %s unquantized (model.quantization ignored)", model.name_or_path)
        self._stack = contextlib.ExitStack()
        endpoint = self._stack.enter_context(
            serve_model(vllm, model, adapter, template_kwargs=template_kwargs or None, log_path=log_path)
        )
        # One request per sample, as many in flight as the server batches at once.
        concurrency = batched_sequences(vllm.extra_args)
        spec = EndpointSpec(
            endpoint.base_url, endpoint.model, "chat", concurrency=concurrency, timeout_s=vllm.request_timeout_s
        )
        self._sampler = EndpointSampler(spec, sampling)
        self.mode, self.chunk, self.endpoint = self._sampler.mode, self._sampler.chunk, endpoint

    def sample(self, items: list, conversations: list | None = None) -> list:
        self.endpoint.server.check_alive()  # a server that died says so, with its log, instead of N failed requests
        return self._sampler.sample(items, conversations)

    def close(self) -> None:
        self._stack.close()


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
