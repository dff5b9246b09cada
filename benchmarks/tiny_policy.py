"""What the benchmarks on the tiny demo share: the recipe's training tasks, loading a policy folder, and the warm
start that `examples/tiny.yaml` prescribes (the tiny random-init model, SFT on reference answers and near misses),
so that the policy writes code for the sandbox to grade. Imported by the scripts beside it; not a benchmark itself.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from azr.config import AzrConfig

TINY_RECIPE = Path(__file__).resolve().parent.parent / "examples" / "tiny.yaml"


def load_policy(cfg: AzrConfig, folder: str):
    """(model, tokenizer) from a policy folder, with the recipe's other model settings."""
    from azr.models import build_model_and_tokenizer

    return build_model_and_tokenizer(dataclasses.replace(cfg.model, name_or_path=folder))


def training_tasks(cfg: AzrConfig, tokenizer):
    """The recipe's training tasks, selected and fitted as `azr train` does."""
    from azr.data import load_tasks, select_tasks
    from azr.training import fit_tasks

    tasks = select_tasks(
        load_tasks(cfg.data.train, cfg.data.column_map), shuffle=cfg.data.shuffle, seed=cfg.seed, max_tasks=None
    )
    return fit_tasks(tasks, tokenizer, cfg)


def warm_start(cfg: AzrConfig, tmp: Path, grader) -> tuple[str, float, int]:
    """Build the tiny model and fine-tune it as the recipe's warm start does (reference answers, and its near misses
    if it asks for them): (policy dir, seconds, rows)."""
    from transformers import set_seed

    from azr.models import build_tiny_model, quiet_third_party
    from azr.training import find_near_misses, on_gpu, run_sft, sft_args, sft_dataset

    started = time.perf_counter()
    base = build_tiny_model(tmp / "tiny-model", seed=cfg.seed)
    quiet_third_party()  # build_tiny_model turns transformers' progress bars back on when it is done
    set_seed(cfg.seed)
    model, tokenizer = load_policy(cfg, str(base))
    tasks = training_tasks(cfg, tokenizer)
    misses = find_near_misses(tasks, grader, cfg.sft.near_misses, cfg.seed) if cfg.sft.near_misses else {}
    dataset = sft_dataset(tasks, tokenizer, cfg.template_kwargs(), misses)
    args = sft_args(dataclasses.replace(cfg, output_dir=str(tmp)), cpu=not on_gpu())  # checkpoints in tmp/sft
    final = run_sft(model, tokenizer, dataset, args, None, [], None, tmp / "sft" / "final")
    return str(final), time.perf_counter() - started, len(dataset)
