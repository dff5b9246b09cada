"""TRL's SFTTrainer for the warm start (`azr.training.sft` builds its datasets and records its outputs): train, then
save the adapter (or the full model) and the tokenizer.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)


def run_sft(model, tokenizer, dataset, args, peft_config, callbacks, resume_from: str | None, final_dir: Path) -> Path:
    """Train, then save the adapter (or the full model) and the tokenizer to `final_dir`; returns it."""
    from transformers import PrinterCallback
    from trl import SFTTrainer

    from azr.models import keep_vectors_fp32

    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=callbacks,
    )
    trainer.remove_callback(PrinterCallback)
    keep_vectors_fp32(trainer.model)  # before train() creates the optimizer
    for callback in callbacks:
        if hasattr(callback, "trainer"):
            callback.trainer = trainer
    log.info("sft: warm start on %d examples", len(dataset))
    trainer.train(resume_from_checkpoint=resume_from)
    trainer.save_model(str(final_dir))  # on every rank (a sharded model is gathered); the main one writes
    if trainer.args.should_save:
        tokenizer.save_pretrained(str(final_dir))
    return final_dir
