"""What packing saves in the training pass, side by side in one run: the policy's forward and backward over one
micro-batch of TRL's padded layout (`GRPOTrainer`'s own `_get_per_token_logps_and_entropies`) and over the same
rows packed by a token budget (`AZRGRPOTrainer`'s, `azr.rollouts.pack`), with the recipe's adapter; and which of
the two the trainer itself would run that batch as (it times one forward pass each way, once a run).

The batch is shaped like a feedback round's: every row a prompt and a first answer, and a share of the rows (those
whose answer failed its public tests) a second turn as well, so that their transcripts are several times longer.
The arms alternate ABAB (padded, packed, padded, ...) so a drift in the machine's load falls on both; each figure is
the median over the repeats. Both arms get the same loss, checked before timing.

Usage: python benchmarks/packing.py [--config RECIPE] [--rows N] [--long-share F] [--repeats R] [--json]
(default: examples/smollm2-135m.yaml where `make smollm2` has imported its model, else examples/tiny.yaml)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "examples" / "smollm2-135m.yaml"
TINY = ROOT / "examples" / "tiny.yaml"


def _trainer(config: Path, out: Path):
    from trl import GRPOConfig

    from azr.config import load_config
    from azr.data import load_tasks
    from azr.models import build_model_and_tokenizer, build_peft_config
    from azr.training import grpo_dataset
    from azr.training.trl.trainer import AZRGRPOTrainer

    cfg = load_config(config)
    model, tokenizer = build_model_and_tokenizer(cfg.model)
    args = GRPOConfig(
        output_dir=str(out),
        use_cpu=True,
        bf16=False,
        report_to="none",
        disable_tqdm=True,
        num_generations=2,
        per_device_train_batch_size=2,
        max_steps=1,
        save_strategy="no",
    )
    trainer = AZRGRPOTrainer(
        model=model,
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=args,
        train_dataset=grpo_dataset(load_tasks("train")[:2]),
        processing_class=tokenizer,
        peft_config=build_peft_config(cfg.model.adapter, model),
    )
    return trainer, cfg


def _batch(vocab: int, rows: int, long_share: float, seed: int = 0):
    """TRL's layout: prompts of 150-400 tokens left-padded, answers of 60-200 tokens, and `long_share` of the rows a
    second turn (the feedback message and another answer: 250-450 tokens more), right-padded."""
    generator = torch.Generator().manual_seed(seed)

    def draw(lo: int, hi: int) -> int:
        return int(torch.randint(lo, hi + 1, (1,), generator=generator))

    prompts = [draw(150, 400) for _ in range(rows)]
    longs = set(range(0, rows, max(1, round(1 / long_share)))) if long_share > 0 else set()
    completions = [draw(60, 200) + (draw(250, 450) if r in longs else 0) for r in range(rows)]
    width_p, width_c = max(prompts), max(completions)
    ids = torch.zeros(rows, width_p + width_c, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        ids[r, width_p - p : width_p + c] = torch.randint(3, vocab, (p + c,), generator=generator)
        mask[r, width_p - p : width_p + c] = 1
    return ids, mask, width_c, len(longs)


def _step(forward, trainer, ids, mask, keep) -> tuple[float, float]:
    """One forward and backward (the loss: the completion tokens' mean log-probability): (seconds, loss)."""
    trainer.model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    logps, _, _ = forward(trainer.model, ids, mask, keep, batch_size=ids.size(0))
    scored = mask[:, -keep:].float()
    loss = -(logps * scored).sum() / scored.sum()
    loss.backward()
    return time.perf_counter() - start, float(loss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=None)
    parser.add_argument("--rows", type=int, default=8, help="rows of the micro-batch (the recipe's: 8)")
    parser.add_argument("--long-share", type=float, default=0.25, help="share of rows with a second turn")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    config = args.config or (REAL if (ROOT / "runs" / "smollm2-135m-instruct" / "config.json").is_file() else TINY)
    from trl import GRPOTrainer

    from azr.rollouts import pack

    with tempfile.TemporaryDirectory() as tmp:
        trainer, _ = _trainer(config, Path(tmp))
        trainer.model.train()
        ids, mask, keep, longs = _batch(trainer.model.config.vocab_size, args.rows, args.long_share)
        packed = pack(ids, mask, keep)

        def padded(*a, **k):
            return GRPOTrainer._get_per_token_logps_and_entropies(trainer, *a, **k)

        arms = {"padded": padded, "packed": trainer._get_per_token_logps_and_entropies}
        _step(arms["packed"], trainer, ids, mask, keep)  # warm; the trainer times a position each way (once)
        measured = trainer.position_seconds
        trainer.position_seconds = (1.0, 0.0)  # the packed arm packs, whatever the trainer would choose
        losses = {name: _step(forward, trainer, ids, mask, keep)[1] for name, forward in arms.items()}
        if trainer.packing is not True or abs(losses["padded"] - losses["packed"]) > 1e-4:
            sys.exit(f"packing gave another loss or was refused: {losses}, packing={trainer.packing}")
        times: dict[str, list[float]] = {name: [] for name in arms}
        for _ in range(args.repeats):
            for name, forward in arms.items():
                times[name].append(_step(forward, trainer, ids, mask, keep)[0])
    result = {
        "config": str(config.relative_to(ROOT)) if config.is_relative_to(ROOT) else str(config),
        "rows": args.rows,
        "rows_with_a_second_turn": longs,
        "tokens_real": int(mask.sum()),
        "positions_padded": int(ids.numel()),
        "positions_packed": packed.tokens,
        "bins": int(packed.input_ids.size(0)),
        "seconds_padded": round(statistics.median(times["padded"]), 3),
        "seconds_packed": round(statistics.median(times["packed"]), 3),
        "trainer_packs": measured is not None and packed.tokens * measured[1] < ids.numel() * measured[0],
    }
    result["packed_over_padded"] = round(result["seconds_packed"] / result["seconds_padded"], 3)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    choice = {True: "packed", False: "padded"}
    print(
        f"{result['config']}: {args.rows} rows, {longs} with a second turn; "
        f"forward + backward, median of {args.repeats}"
    )
    print(f"{'arm':8} {'positions':>10} {'seconds':>9}")
    print(f"{'padded':8} {result['positions_padded']:>10} {result['seconds_padded']:>9.3f}")
    print(f"{'packed':8} {result['positions_packed']:>10} {result['seconds_packed']:>9.3f}  ({result['bins']} bins)")
    print(f"real tokens {result['tokens_real']}; packed / padded time {result['packed_over_padded']:.3f}")
    print(f"the trainer, timing a forward pass each way, would run this batch {choice[result['trainer_packs']]}")


if __name__ == "__main__":
    main()
