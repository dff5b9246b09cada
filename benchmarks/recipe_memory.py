"""GPU memory of the shipped GPU recipes, computed from the model shapes and the recipes' own batch settings, per GPU
for 1 to 8 GPUs under each accelerate recipe in deploy/accelerate/ (deploy/README.md prints this table).

An estimate, term by term, each printed with its arithmetic: the weights (NF4 with double quantization: 0.5 byte per
weight plus ~0.016 for its scales; embeddings and head stay bf16), the LoRA adapters with their gradients and AdamW
state (fp32 on a quantized base: 16 bytes per adapter weight), the KV cache of one generation batch (HF generate
holds per_device_train_batch_size x steps_per_generation sequences at once), the training micro-batch (hidden
states kept by gradient checkpointing, one layer recomputed, and the completion logits three times: bf16 logits,
their temperature-scaled copy and their gradient), and 1.5 GB of CUDA context and allocator slack. The peak is the
resident part plus the larger of generation and training, which never overlap. Sharded recipes (ZeRO-3, FSDP2)
divide the resident weights over the GPUs; DDP and ZeRO-2 keep a whole copy on each.

`--measure` runs each recipe's two memory peaks for real on the local GPU, with random weights of the recipe's
architecture (nothing downloaded): the generation batch through HF generate, and one training micro-batch (forward
with gradient checkpointing, completion log-probs in tiles recomputed in backward as TRL's fused LM head does, backward,
AdamW step on the adapters). It needs transformers, peft and bitsandbytes, and a GPU.

Usage: python benchmarks/recipe_memory.py [--gpus 1,2,8] [--markdown] [--measure [RECIPE ...]]
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
OVERHEAD_GB = 1.5  # CUDA context, cuBLAS workspaces, allocator fragmentation


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


ARCHS = {
    "Qwen/Qwen2.5-Coder-1.5B-Instruct": Arch(1536, 8960, 28, 12, 2, 128, 151936, tied=True),
    "Qwen/Qwen2.5-Coder-7B-Instruct": Arch(3584, 18944, 28, 28, 4, 128, 152064, tied=False),
}


def estimate(recipe: Path, gpus: int, sharded: bool) -> dict[str, float]:
    """GB per GPU by term for `recipe` on `gpus` GPUs (`sharded`: ZeRO-3 / FSDP2, else DDP / ZeRO-2)."""
    cfg = load_config(recipe)
    arch = ARCHS[cfg.model.name_or_path]
    grpo = cfg.grpo
    micro, spg = int(grpo["per_device_train_batch_size"]), int(grpo["steps_per_generation"])
    completion = int(grpo["max_completion_length"])
    seq = PROMPT_TOKENS + completion
    if cfg.model.quantization == "4bit":
        weights = arch.block_linear * (0.5 + 0.016) + arch.embedding * 2
    else:
        weights = (arch.block_linear + arch.embedding) * 2
    adapter = arch.lora(cfg.model.lora.r) * 16 if cfg.model.lora.enabled else (arch.block_linear + arch.embedding) * 6
    share = gpus if sharded else 1
    train_tokens = micro * seq
    block = train_tokens * (4 * arch.hidden + 3 * arch.intermediate) * 2
    return {
        "weights": weights / share / GB,
        "adapter+optimizer": adapter / share / GB,
        "generation KV cache": micro * spg * seq * arch.kv_bytes_per_token() / GB,
        "checkpointed hidden states": arch.layers * train_tokens * arch.hidden * 2 / GB,
        "one block recomputed": block / GB,
        "completion logits x3": 3 * micro * completion * arch.vocab * 2 / GB,
        "overhead": OVERHEAD_GB,
    }


def peak(terms: dict[str, float]) -> float:
    resident = terms["weights"] + terms["adapter+optimizer"] + terms["overhead"]
    train = terms["checkpointed hidden states"] + terms["one block recomputed"] + terms["completion logits x3"]
    return resident + max(terms["generation KV cache"], train)


def recipes() -> list[Path]:
    found = []
    for path in sorted((REPO / "examples").glob("*.yaml")):
        try:
            name = load_config(path).model.name_or_path
        except Exception:  # a recipe this script cannot read is reported by `azr config show`, not here
            continue
        if name in ARCHS:
            found.append(path)
    return found


def measure(recipe: Path) -> dict[str, float]:
    """The recipe's generation and training peaks on this GPU (GB, from torch.cuda.max_memory_allocated), with
    random weights of its architecture."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig, Qwen2Config

    cfg = load_config(recipe)
    arch, grpo = ARCHS[cfg.model.name_or_path], cfg.grpo
    micro, spg = int(grpo["per_device_train_batch_size"]), int(grpo["steps_per_generation"])
    completion = int(grpo["max_completion_length"])
    config = Qwen2Config(
        vocab_size=arch.vocab,
        hidden_size=arch.hidden,
        intermediate_size=arch.intermediate,
        num_hidden_layers=arch.layers,
        num_attention_heads=arch.heads,
        num_key_value_heads=arch.kv_heads,
        tie_word_embeddings=arch.tied,
        max_position_embeddings=32768,
    )
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
    lora = cfg.model.lora
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", default="1,8", help="GPU counts to show, comma-separated")
    parser.add_argument("--markdown", action="store_true", help="only the summary table, as deploy/README.md has it")
    parser.add_argument(
        "--measure", nargs="*", type=Path, help="measure these recipes (all of them: none named) on this GPU"
    )
    args = parser.parse_args()
    if args.measure is not None:
        for recipe in args.measure or recipes():
            figures = measure(recipe)
            print(f"{recipe.name} measured: " + ", ".join(f"{k} {v:.2f}" for k, v in figures.items()), flush=True)
        return
    counts = [int(n) for n in args.gpus.split(",")]
    rows = []
    for recipe in recipes():
        one = estimate(recipe, 1, sharded=False)
        if not args.markdown:
            print(f"{recipe.relative_to(REPO)} on one GPU:")
            for name, value in one.items():
                print(f"  {name:<28} {value:6.2f} GB")
            print(f"  {'peak':<28} {peak(one):6.2f} GB")
        for n in counts:
            rows.append(
                (
                    recipe.name,
                    n,
                    peak(estimate(recipe, n, sharded=False)),
                    peak(estimate(recipe, n, sharded=True)),
                )
            )
    print("| recipe | GPUs | per GPU, DDP / ZeRO-2 | per GPU, ZeRO-3 / FSDP2 |")
    print("|---|---|---|---|")
    for name, n, ddp, sharded in rows:
        print(f"| `{name}` | {n} | {ddp:.1f} GB | {sharded:.1f} GB |")


if __name__ == "__main__":
    main()
