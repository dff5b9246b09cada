"""The ranks of one run: which of the processes a launcher started (torchrun, `accelerate launch`, srun) this one
is, and the few collectives azr adds to TRL's own so that every rank takes the same decisions and one writes.

Owns starting the process group before anything is written, each rank dying with its launcher, and the helpers
the run's steps use: a barrier, gathering and broadcasting small Python objects, summing counts, and splitting a
list of work evenly. Built on accelerate's `PartialState` and its operations, so the same code serves DDP,
DeepSpeed and FSDP. It does not own TRL's gathers (rewards, its metrics) nor the model's sharding. One process
(no launcher) is a world of one: every helper is then a no-op that returns its input.
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from azr.config import SandboxConfig

if TYPE_CHECKING:
    import torch
    from transformers import Trainer

log = logging.getLogger(__name__)
T = TypeVar("T")
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Ranks:
    """This process's place in the run; `rank` 0 is the main process, the one that writes the run's files."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    local_world: int = 1  # processes on this machine: they share its CPU cores, and so the sandbox workers

    @property
    def main(self) -> bool:
        return self.rank == 0

    def wait(self) -> None:
        """Every rank reaches this point before any goes on (after the main process wrote what others read)."""
        if self.world > 1:
            _state().wait_for_everyone()

    def gather(self, obj: T) -> list[T]:
        """Every rank's `obj`, in rank order, on every rank (pickled; for small objects such as rows or records)."""
        if self.world == 1:
            return [obj]
        from accelerate.utils import gather_object

        return gather_object([obj])

    def broadcast(self, obj: T) -> T:
        """The main process's `obj` on every rank (what the others pass is ignored)."""
        if self.world == 1:
            return obj
        from accelerate.utils import broadcast_object_list

        return broadcast_object_list([obj], from_process=0)[0]

    def total(self, *numbers: float) -> list[float]:
        """`numbers` summed element-wise over the ranks."""
        if self.world == 1:
            return [float(n) for n in numbers]
        import torch
        from accelerate.utils import reduce

        state = _state()
        summed = reduce(torch.tensor(numbers, dtype=torch.float64, device=state.device), reduction="sum")
        return [float(n) for n in summed.tolist()]

    def split(self, items: list[T]) -> tuple[list[T], int]:
        """This rank's contiguous share of `items` and how many of it are real: every rank gets the same count, the
        short ones padded with their last item, since a sharded model (ZeRO-3, FSDP) needs every rank in every
        forward pass. Shares in rank order, real parts concatenated, give back `items`."""
        size = -(-len(items) // self.world)
        mine = items[self.rank * size : (self.rank + 1) * size]
        real = len(mine)
        return mine + (mine or items[-1:])[-1:] * (size - real), real

    def on_main(self, fn: Callable[[], T], what: str) -> T:
        """`fn()` on the main process, its result on every rank; an error there stops every rank (naming `what`),
        not just the main one while the others wait in the broadcast."""
        if self.world == 1:
            return fn()
        result, error = None, None
        if self.main:
            try:
                result = fn()
            except Exception as exc:
                log.exception("%s: failed on the main process", what)
                error = f"{type(exc).__name__}: {exc}"
        result, error = self.broadcast((result, error))
        if error is not None:
            raise RuntimeError(f"{what} failed on the main process: {error}")
        return result


def rank_env() -> Ranks:
    """The ranks as the launcher's environment describes them (torchrun, accelerate and Slurm's srun with
    torchrun set RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE); one process when none is set. Read before the
    process group exists, e.g. to size the sandbox."""
    world = _env_int("WORLD_SIZE", 1)
    local_world = _env_int("LOCAL_WORLD_SIZE", world)
    return Ranks(_env_int("RANK", 0), world, _env_int("LOCAL_RANK", 0), local_world)


def start_ranks() -> Ranks:
    """Join the run's process group (gloo on the CPU, NCCL on GPUs, DeepSpeed's when accelerate says so) and return
    this rank; a single process returns at once, without importing torch. Ranks other than the main one log
    warnings and errors only, so that the console shows each line once."""
    ranks = rank_env()
    if ranks.world == 1:
        return ranks
    die_with_launcher()
    import torch

    state = _state(cpu=not torch.cuda.is_available())
    ranks = Ranks(state.process_index, state.num_processes, state.local_process_index, ranks.local_world)
    if not ranks.main:
        logging.getLogger().setLevel(logging.WARNING)
    log.info("ranks: %d processes, %d on this machine (%s)", ranks.world, ranks.local_world, state.distributed_type)
    return ranks


def die_with_launcher() -> None:
    """Ask the kernel to SIGKILL this rank when its launcher dies. torchrun starts each rank in a session of its own,
    so a SIGKILL to the launcher's process group does not reach the ranks: without this they would train on,
    orphaned, and write into the run a resume is about to continue."""
    if not os.environ.get("TORCHELASTIC_RUN_ID"):  # started by torchrun's agent (or accelerate launch through it)
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        log.warning("ranks: cannot ask to die with the launcher; kill the ranks' sessions with it")
        return
    if os.getppid() == 1:  # the launcher died before the request was made
        os.kill(os.getpid(), signal.SIGKILL)


def _state(cpu: bool = False) -> Any:
    from accelerate import PartialState

    return PartialState(cpu=cpu)


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip().isdigit() else default


def sandbox_share(cfg: SandboxConfig, ranks: Ranks) -> SandboxConfig:
    """This rank's sandbox settings: the machine's workers (`sandbox.workers`, or one per CPU core) shared evenly
    by the ranks on it, at least one each, so that eight ranks on one box do not start eight pools of every core."""
    if ranks.local_world == 1:
        return cfg
    machine = cfg.workers or os.cpu_count() or 1
    return dataclasses.replace(cfg, workers=max(1, machine // ranks.local_world))


def replica_digests(trainer: Trainer, ranks: Ranks) -> list[str] | None:
    """Every rank's SHA-256 of its trainable weights, in rank order, when each rank holds a whole replica (DDP,
    ZeRO-1/2); None when there is one process or the weights are sharded (FSDP, ZeRO-3: each rank has a part). Data
    parallel ranks must agree after every step; a difference is logged as an error (a desynchronised run)."""
    from transformers.integrations import is_deepspeed_zero3_enabled

    if ranks.world == 1 or trainer.is_fsdp_enabled or is_deepspeed_zero3_enabled():
        return None
    digests = ranks.gather(weights_digest(trainer.model))
    if len(set(digests)) > 1:
        log.error("ranks: the ranks' trainable weights differ after training (%s)", ", ".join(d[:12] for d in digests))
    return digests


def weights_digest(model: torch.nn.Module) -> str:
    """SHA-256 over the names, shapes, dtypes and bytes of a model's trainable parameters, in name order."""
    import hashlib

    import torch

    digest = hashlib.sha256()
    for name, param in sorted((n, p) for n, p in model.named_parameters() if p.requires_grad):
        tensor = param.detach().to("cpu").contiguous().reshape(-1)
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype};".encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
