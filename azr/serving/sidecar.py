"""The vLLM server of one run, by `vllm.mode` (`Sidecar`: the machine checked before anything slow, the server
started before the policy loads, adapter mode's `LoraSync`, teardown however the run ends; server mode's command is
TRL's, passed in), and `serve_model`, a server on a local model for `azr eval --vllm` and `azr gen`. Only the main
process of a multi-process run starts a server.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from azr.config import AzrConfig, ModelConfig, VllmConfig
from azr.logs import atomic_write_json
from azr.serving.lora_sync import LoraSync
from azr.serving.modes import adapter_server, check_host, host_facts, model_server, seeded_sampling_args
from azr.serving.vllm import VllmServer, free_port

if TYPE_CHECKING:
    from accelerate import Accelerator
    from peft import PeftModel
    from transformers import TrainerState

log = logging.getLogger(__name__)

# Builds a mode's server: (recipe, the run's max model length, log file) -> the server, not started yet.
ServerCommand = Callable[[AzrConfig, int | None, Path | None], VllmServer]


def is_main_process() -> bool:
    """Rank 0 of a launcher (accelerate, torchrun), or a run of one process."""
    return os.environ.get("RANK", "0") == "0"


class GrpoTrainer(Protocol):
    """What adapter mode reads of the GRPO trainer it serves (TRL's GRPOTrainer): its sampling settings, policy,
    accelerator and step."""

    args: Any  # trl.GRPOConfig: output_dir, generation_kwargs, vllm_structured_outputs_regex
    temperature: float
    top_p: float
    top_k: int | None
    min_p: float | None
    repetition_penalty: float
    max_completion_length: int
    model: PeftModel
    accelerator: Accelerator
    state: TrainerState


class Sidecar:
    """The vLLM side of a training run. Use as a context manager around the run; call `start(folder)` just
    before the policy loads. 'off' and 'colocate' start nothing ('colocate' runs inside TRL). Server mode runs the
    command `trl_server` builds (TRL's `vllm serve` flags: `azr.training.trl.vllm.trl_server`)."""

    def __init__(self, cfg: AzrConfig, max_model_len: int | None = None, trl_server: ServerCommand | None = None):
        self.cfg, self.max_model_len = cfg, max_model_len
        self.mode = cfg.vllm.mode
        if self.mode == "server" and trl_server is None:
            raise ValueError("vllm.mode=server: the Sidecar needs trl_server, the command of TRL's server")
        # the server this mode launches ('off' and 'colocate': none)
        self.command: ServerCommand | None = {"adapter": adapter_server, "server": trl_server}.get(self.mode)
        self.server: VllmServer | None = None
        self.group_port = 0
        self.lora_sync: LoraSync | None = None
        self.folder: Path | None = None

    def check(self) -> None:
        """Refuse a mode this machine cannot run, before anything slow starts (NotAvailableError)."""
        if self.mode != "off":
            check_host(self.cfg, host_facts(self.cfg))
        if self.mode == "adapter":
            seeded_sampling_args(self.cfg.vllm, self.cfg.vllm.max_model_len or self.max_model_len)

    def start(self, folder: Path, base: str | None = None) -> None:
        """Launch the server (adapter, server modes; main process) with its log and `server.json` in `folder`, and
        wait until it is healthy; VllmServerError with its log's last lines if it is not. `base` is the model to
        serve instead of model.name_or_path (the warm-started weights under sft.full_weights)."""
        if base is not None:
            self.cfg = dataclasses.replace(self.cfg, model=dataclasses.replace(self.cfg.model, name_or_path=base))
        if self.command is None or not is_main_process():
            return
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.server = self.command(self.cfg, self.max_model_len, self.folder / "server.log")
        if self.mode == "server":
            self.group_port = free_port()
        self.server.start()
        atomic_write_json(self.folder / "server.json", self.describe())

    def describe(self) -> dict[str, Any]:
        """What to look for if something goes wrong: the pid (also its process group), the URL, the log."""
        server = self.server
        if server is None:
            return {"mode": self.mode}
        return {"mode": self.mode, "pid": server.pid, "url": server.url, "log": str(server.log_path)}

    def generation(self, trainer: GrpoTrainer) -> LoraSync | None:
        """Adapter mode: the backend TRL's generation path is to call, built from `trainer`'s model, accelerator
        and sampling settings (None in the other modes)."""
        if self.mode != "adapter":
            return None
        from azr.rollouts import eos_ids

        args = trainer.args
        sampling = {
            "temperature": trainer.temperature,
            "top_p": trainer.top_p,
            "top_k": trainer.top_k or 0,
            "min_p": trainer.min_p or 0.0,
            "repetition_penalty": trainer.repetition_penalty,
            "max_tokens": trainer.max_completion_length,
        }
        if args.vllm_structured_outputs_regex:
            sampling["structured_outputs"] = {"regex": args.vllm_structured_outputs_regex}
        sampling.update(args.generation_kwargs or {})  # as TRL's server mode: extra request fields win
        folder = (self.folder or Path(args.output_dir)) / "adapters"
        self.lora_sync = LoraSync(
            self.server,
            folder,
            model=trainer.model,
            accelerator=trainer.accelerator,
            sampling=sampling,
            step=lambda: trainer.state.global_step,
            timeout_s=self.cfg.vllm.request_timeout_s,
            max_restarts=self.cfg.vllm.max_restarts,
            restarted=self._restarted,
            tokenizer=trainer.processing_class,
            eos=frozenset(eos_ids(trainer.model, trainer.processing_class)),
        )
        return self.lora_sync

    def _restarted(self, restarts: int) -> None:
        """The server was started again mid-run: `server.json` names the new pid and counts the restarts."""
        if self.folder is not None:
            atomic_write_json(self.folder / "server.json", {**self.describe(), "restarts": restarts})

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()

    def __enter__(self) -> Sidecar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible server: its base URL (with /v1) and the model name to put in requests."""

    base_url: str
    model: str
    server: VllmServer


@contextlib.contextmanager
def serve_model(vllm: VllmConfig, model: ModelConfig, adapter: str | None = None, **options: Any) -> Iterator[Endpoint]:
    """Start vLLM's OpenAI server on `model` (with `adapter`, a peft LoRA folder, served under the name 'adapter'),
    yield its `Endpoint` once healthy, and stop it on the way out, however the block ends. `options` are
    `model_server`'s: `extra_args`, `template_kwargs` (the server's chat-template defaults), `log_path`.

    For `azr gen`: `with serve_model(cfg.vllm, cfg.model, adapter, extra_args=["--enable-auto-tool-choice",
    "--tool-call-parser", "hermes"]) as endpoint:` then send chat requests to `endpoint.base_url` as
    `endpoint.model`.
    """
    server = model_server(vllm, model, adapter, **options)
    with server:
        yield Endpoint(server.base_url, "adapter" if adapter else server.model_name or model.name_or_path, server)
