"""The SFT warm start: supervised fine-tuning on reference answers before GRPO, through TRL's SFTTrainer.

Owns the dataset (each prompt rendered exactly as GRPO will render it, each completion a strict-format reference
answer ending in EOS) and the phase's outputs under `output_dir/sft/`. Loss is on completion tokens only. It does
not decide whether the phase runs or is skipped on resume; `train.run_train` does.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from azr.data import Task
from azr.prompts import chat_messages, reference_answer

log = logging.getLogger(__name__)


def sft_dataset(tasks: list[Task], tokenizer, template_kwargs: dict[str, Any]):
    """Prompt-completion rows as plain text: the prompt through the chat template with GRPO's own switches (so the
    warm start conditions on the exact tokens the policy will later see), the answer closed by the EOS token."""
    from datasets import Dataset

    rows = []
    for task in tasks:
        if not task.solution:
            continue
        prompt = tokenizer.apply_chat_template(
            chat_messages(task.prompt), tokenize=False, add_generation_prompt=True, **template_kwargs
        )
        rows.append(
            {"prompt": prompt, "completion": reference_answer(task.solution, task.entry_point) + tokenizer.eos_token}
        )
    return Dataset.from_list(rows)


def sft_args(args: dict[str, Any], out: Path, seed: int, gradient_checkpointing: bool, cpu: bool):
    """trl.SFTConfig from `sft.args`, with azr's managed fields and CPU defaults."""
    from trl import SFTConfig

    values: dict[str, Any] = {
        "logging_steps": 10,
        "save_strategy": "steps",  # per epoch would mean a save every few steps on small data sets
        "save_steps": 100,
        "save_total_limit": 1,
        "report_to": [],
        "lr_scheduler_type": "cosine",
        "completion_only_loss": True,
        **({"use_cpu": True, "bf16": False} if cpu else {}),
        **args,
    }
    return SFTConfig(
        output_dir=str(out / "checkpoints"),
        seed=seed,
        gradient_checkpointing=gradient_checkpointing,
        disable_tqdm=True,
        **values,
    )


def run_sft(model, tokenizer, dataset, args, peft_config, callbacks, resume_from: str | None, final_dir: Path) -> Path:
    """Train, then save the adapter (or the full model) and the tokenizer to `final_dir`; returns it."""
    from transformers import PrinterCallback
    from trl import SFTTrainer

    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=callbacks,
    )
    trainer.remove_callback(PrinterCallback)
    for callback in callbacks:
        if hasattr(callback, "trainer"):
            callback.trainer = trainer
    log.info("sft: warm start on %d reference answers", len(dataset))
    trainer.train(resume_from_checkpoint=resume_from)
    trainer.save_model(str(final_dir))
    tokenizer.save_pretrained(str(final_dir))
    return final_dir
