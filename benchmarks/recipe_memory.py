"""GPU memory of the shipped GPU recipes per GPU, computed term by term from the model's shapes and the recipe's own
batch settings, for one GPU and for eight under DDP, ZeRO-2 and ZeRO-3 / FSDP2 (deploy/README.md prints the table
and explains each term); with `--measure`, the same peaks measured on this machine's GPU.

The terms (bytes): weights (NF4 with double quantization: 0.516 per weight of the decoder blocks, embeddings and
head in bf16; 2 per weight unquantized); trainable state (LoRA on a quantized base stays fp32: weight, gradient and
two AdamW moments, 16 per adapter weight; full fine-tuning, 2 for the gradient plus 4 for bf16 AdamW moments, or
under DeepSpeed 14 for the gradient, fp32 master copy and moments); the generation batch (HF generate runs
per_device_train_batch_size x steps_per_generation sequences at once: its peak is the larger of the prefill, where
every prompt token's MLP and attention intermediates exist together, and the last decode step, with the whole KV
cache and its grouped-query expansion); and the training micro-batch (the hidden states gradient checkpointing
keeps, one decoder block recomputed with its backward, about four times its activations, and one 4,096 x 32,768
tile of TRL's fused LM head). Peak = weights + trainable state + the larger of generation and training, plus 1 GB
of CUDA context. Sharding divides what it shards by the GPU count: ZeRO-2 the gradients and optimizer state,
ZeRO-3 / FSDP2 the weights too; DDP nothing.

The generation and training factors were checked against `--measure` on an H100 (random weights of each recipe's
architecture; see MEASURED): within 10%. `--measure` needs transformers, peft, bitsandbytes and a GPU: it runs the
generation batch through HF generate at full length, and one training micro-batch (forward with gradient
checkpointing, completion log-probs in tiles recomputed in backward as TRL's fused LM head does, backward, AdamW
step on the adapters), and prints torch's peak allocated and reserved memory.

Usage: python benchmarks/recipe_memory.py [--markdown] [--measure [RECIPE ...]]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from azr.config import load_config

REPO = Path(__file__).resolve().parent.parent
GB = 1e9
PROMPT_TOKENS = 400  # the longest shipped training prompt with azr's system message (1,312 characters, ~3.5 per token)
CONTEXT_GB = 1.0  # the CUDA context and cuBLAS workspaces, outside torch's allocator
# Peak allocated GB on one H100 80GB (torch 2.11, transformers 5.23, peft 0.21, bitsandbytes 0.50; `--measure`):
# generation batch, training micro-batch, and the allocator's peak reserved memory. Stored figures, printed as such:
# a run without `--measure` measures nothing.
MEASURED_ON = "one H100 80GB, 2026-11-23, torch 2.11, transformers 5.23, peft 0.21, bitsandbytes 0.50"
MEASURED = {
    "qwen2.5-coder-1.5b-qlora.yaml": {"generation": 9.21, "training": 6.74, "reserved": 12.91},
    "qwen2.5-coder-7b-qlora.yaml": {"generation": 22.56, "training": 11.41, "reserved": 30.29},
}


@dataclass(frozen=True)
class Arch:
    """A model's shapes (its config.json), so that nothing is downloaded."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool

    def linear_shapes(self) -> list[tuple[int, int]]:
        """(in, out) of every linear layer of one decoder block: q, k, v, o, gate, up, down."""
        h, kv = self.hidden, self.kv_heads * self.head_dim
        i = self.intermediate
        return [(h, h), (h, kv), (h, kv), (h, h), (h, i), (h, i), (i, h)]

    @property
    def block_linear(self) -> int:
        return self.layers * sum(a * b for a, b in self.linear_shapes())

    @property
    def embedding(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied else 2)

    def lora(self, r: int) -> int:
        return self.layers * sum(r * (a + b) for a, b in self.linear_shapes())

    def kv_bytes_per_token(self) -> int:
        return self.layers * 2 * self.kv_heads * self.head_dim * 2  # K and V, bf16

    def qwen2_config(self, **extra):
        """transformers' Qwen2Config of this shape (random weights of it need no download); `extra` adds fields."""
        from transformers import Qwen2Config

        return Qwen2Config(
            vocab_size=self.vocab,
            hidden_size=self.hidden,
            intermediate_size=self.intermediate,
            num_hidden_layers=self.layers,
            num_attention_heads=self.heads,
            num_key_value_heads=self.kv_heads,
            tie_word_embeddings=self.tied,
            max_position_embeddings=32768,
            rope_theta=1_000_000.0,
            rms_norm_eps=1e-6,
            **extra,
        )


ARCHS = {
    "Qwen/Qwen2.5-Coder-1.5B-Instruct": Arch(1536, 8960, 28, 12, 2, 128, 151936, tied=True),
    "Qwen/Qwen2.5-Coder-7B-Instruct": Arch(3584, 18944, 28, 28, 4, 128, 152064, tied=False),
}
# (label, recipe, --set overrides, all weights trained): the shipped recipes, the 7B one unquantized, and fully
# fine-tuned (no adapter)
VARIANTS = [
    ("1.5B QLoRA (shipped)", "qwen2.5-coder-1.5b-qlora.yaml", [], False),
    ("7B QLoRA (shipped)", "qwen2.5-coder-7b-qlora.yaml", [], False),
    ("7B QLoRA, steps_per_generation 16", "qwen2.5-coder-7b-qlora.yaml", ["grpo.steps_per_generation=16"], False),
    ("7B LoRA bf16", "qwen2.5-coder-7b-qlora.yaml", ["model.quantization=none"], False),
    ("7B full fine-tuning", "qwen2.5-coder-7b-qlora.yaml", ["model.quantization=none"], True),
]
# column -> (GPUs, sharding, whether the trainer's GPUs generate: with a vLLM server (TRL server mode) they do not)
MODES = {
    "one GPU": (1, "ddp", True),
    "8 x DDP": (8, "ddp", True),
    "8 x ZeRO-2": (8, "zero2", True),
    "8 x ZeRO-3/FSDP2": (8, "zero3", True),
    "8 x DDP, vLLM server": (8, "ddp", False),
}


def estimate(
    recipe: Path, overrides: list[str], gpus: int = 1, mode: str = "ddp", full: bool = False
) -> dict[str, float]:
    """GB per GPU, term by term, for `recipe` with `overrides` on `gpus` GPUs sharded as `mode` (ddp / zero2 /
    zero3, the last also FSDP2); `full`: every weight trained, no adapter."""
    cfg = load_config(recipe, overrides)
    arch, grpo = ARCHS[cfg.model.name_or_path], cfg.grpo
    micro, spg = int(grpo["per_device_train_batch_size"]), int(grpo["steps_per_generation"])
    seq = PROMPT_TOKENS + int(grpo["max_completion_length"])
    params = arch.block_linear + arch.embedding
    if cfg.model.quantization == "4bit":
        weights = arch.block_linear * 0.516 + arch.embedding * 2
    else:
        weights = params * 2
    if cfg.model.adapter.enabled and not full:  # fp32 adapter weight (4) + gradient, moments (12)
        held, sharded = arch.lora(cfg.model.adapter.r) * 4, arch.lora(cfg.model.adapter.r) * 12
    else:
        held, sharded = 0, params * (14 if mode != "ddp" else 6)
    split = gpus if mode != "ddp" else 1
    if mode == "zero3":
        weights, held = weights / gpus, held / gpus
    batch = micro * spg
    prompt = batch * PROMPT_TOKENS
    prefill = prompt * (4 * arch.intermediate + 8 * arch.hidden) * 2 + batch * arch.heads * PROMPT_TOKENS**2 * 4
    prefill += prompt * arch.kv_bytes_per_token()
    decode = batch * seq * arch.kv_bytes_per_token() + 2 * batch * arch.heads * seq * arch.head_dim * 2
    tokens = micro * seq
    training = arch.layers * tokens * arch.hidden * 2 + 4 * tokens * (4 * arch.hidden + 3 * arch.intermediate) * 2
    training += 4096 * 32768 * 6
    return {
        "weights": weights / GB,
        "trainable state": (held + sharded / split) / GB,
        "generation": max(prefill, decode) / GB,
        "training": training / GB,
    }


def peak(terms: dict[str, float], generates: bool = True) -> float:
    """Peak allocated by torch (CUDA context excluded); `generates`: the trainer's GPU runs the generation batch."""
    work = max(terms["generation"], terms["training"]) if generates else terms["training"]
    return terms["weights"] + terms["trainable state"] + work


def table() -> list[str]:
    """The markdown table deploy/README.md carries: peak GB per GPU (CUDA context included) by variant and mode."""
    lines = ["| variant | " + " | ".join(MODES) + " |", "|---" * (len(MODES) + 1) + "|"]
    for label, name, overrides, full in VARIANTS:
        cells = []
        for gpus, mode, generates in MODES.values():
            terms = estimate(REPO / "examples" / name, overrides, gpus, mode, full)
            cells.append(f"{peak(terms, generates) + CONTEXT_GB:.1f}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def measure(recipe: Path) -> dict[str, float]:
    """The recipe's generation and training peaks on this GPU (GB, from torch.cuda.max_memory_allocated), with
    random weights of its architecture."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    cfg = load_config(recipe)
    arch, grpo = ARCHS[cfg.model.name_or_path], cfg.grpo
    micro, spg = int(grpo["per_device_train_batch_size"]), int(grpo["steps_per_generation"])
    completion = int(grpo["max_completion_length"])
    config = arch.qwen2_config()
    with tempfile.TemporaryDirectory() as folder:
        with torch.device("cuda"):
            model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        model.save_pretrained(folder)  # loaded back below as azr loads a checkpoint: quantized on the way in
        del model
        torch.cuda.empty_cache()
        quant = None
        if cfg.model.quantization == "4bit":
            quant = BitsAndBytesConfig(
                load_in_4bit=True,
                bnb_4bit_quant_type="nf4",
                bnb_4bit_use_double_quant=True,
                bnb_4bit_compute_dtype=torch.bfloat16,
            )
        model = AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch.bfloat16, quantization_config=quant, device_map={"": 0}
        )
    out = {"weights": torch.cuda.memory_allocated() / GB}
    lora = cfg.model.adapter
    model = get_peft_model(
        model, LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=0.0, target_modules="all-linear")
    )
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-5)
    out["adapter"] = torch.cuda.memory_allocated() / GB - out["weights"]

    prompts = torch.randint(0, arch.vocab, (micro * spg, PROMPT_TOKENS), device="cuda")
    model.eval()
    torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    with torch.no_grad():
        model.generate(
            input_ids=prompts,
            attention_mask=torch.ones_like(prompts),
            max_new_tokens=completion,
            min_new_tokens=completion,  # every sequence to full length: the worst case the recipe allows
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            pad_token_id=0,
        )
    out["generation peak"] = torch.cuda.max_memory_allocated() / GB
    out["generation s"] = time.perf_counter() - started

    model.train()  # TRL turns gradient checkpointing off while generating and back on to train
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.enable_input_require_grads()
    ids = torch.randint(0, arch.vocab, (micro, PROMPT_TOKENS + completion), device="cuda")
    torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    causal = model.get_base_model()
    hidden = causal.model(input_ids=ids).last_hidden_state[:, PROMPT_TOKENS - 1 : -1]
    logps = _tiled_logprobs(hidden.reshape(-1, arch.hidden), causal.lm_head.weight, ids[:, PROMPT_TOKENS:].reshape(-1))
    (-logps.mean()).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=False)  # the gradients stay allocated, as between steps in the trainer
    torch.cuda.synchronize()
    out["training peak"] = torch.cuda.max_memory_allocated() / GB
    out["training s"] = time.perf_counter() - started
    out["reserved peak"] = torch.cuda.max_memory_reserved() / GB
    del model, optimizer
    torch.cuda.empty_cache()
    return out


def _tiled_logprobs(hidden, weight, labels, tokens: int = 4096, vocab: int = 32768):
    """log p(label) per token without the full logits: tiles of `tokens` x `vocab`, each recomputed in backward."""
    import torch
    from torch.utils.checkpoint import checkpoint

    def tile(h, y):
        lse, picked = None, torch.zeros(h.size(0), device=h.device)
        for start in range(0, weight.size(0), vocab):
            logits = (h @ weight[start : start + vocab].T).float()
            part = torch.logsumexp(logits, -1)
            lse = part if lse is None else torch.logaddexp(lse, part)
            inside = (y >= start) & (y < start + logits.size(1))
            picked = picked + torch.where(
                inside, logits.gather(1, (y - start).clamp(0, logits.size(1) - 1)[:, None])[:, 0], 0.0
            )
        return picked - lse

    parts = [
        checkpoint(tile, hidden[i : i + tokens], labels[i : i + tokens], use_reentrant=False)
        for i in range(0, hidden.size(0), tokens)
    ]
    return torch.cat(parts)


def _this_machine() -> str:
    """The GPU and the versions a `--measure` ran with, printed beside its figures."""
    import importlib.metadata

    import torch

    versions = []
    for name in ("torch", "transformers", "peft", "bitsandbytes"):
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name} absent")
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    return f"{gpu}, {time.strftime('%Y-%m-%d')}, " + ", ".join(versions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="only the table, as deploy/README.md has it")
    parser.add_argument("--measure", nargs="*", type=Path, help="measure these recipes (none named: both) on this GPU")
    args = parser.parse_args()
    if args.measure is not None:
        for recipe in args.measure or [REPO / "examples" / name for name in MEASURED]:
            figures = measure(recipe)
            print(f"{recipe.name} measured now: " + ", ".join(f"{k} {v:.2f}" for k, v in figures.items()), flush=True)
        print(f"on {_this_machine()}")
        return
    if not args.markdown:
        print(f"Computed here; the 'stored' peaks were measured earlier with --measure on {MEASURED_ON}.")
        for name, measured in MEASURED.items():
            terms = estimate(REPO / "examples" / name, [])
            print(f"{name} on one GPU (GB, torch's allocations):")
            for term, value in terms.items():
                print(f"  {term:<16} {value:6.2f}")
            resident = terms["weights"] + terms["trainable state"]
            for phase in ("generation", "training"):
                print(f"  {phase} peak     {resident + terms[phase]:6.2f}   stored {measured[phase]:.2f}")
        print()
    print("\n".join(table()))


if __name__ == "__main__":
    main()
