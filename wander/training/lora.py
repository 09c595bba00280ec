"""LoRA through TRL's `peft_config`, merged when a model is saved: every later stage, vLLM and the registry load a
plain checkpoint and never need peft.

    from wander.training.lora import lora_config, save_trained

    trainer = SFTTrainer(model=path, args=args, train_dataset=data, peft_config=lora_config({"r": 16}))
    trainer.train()
    save_trained(trainer, "out")  # adapters merged into the base weights; no adapter files
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

# What `lora: {}` means: rank 16 on every linear layer of the blocks (the head and embeddings stay full).
LORA_DEFAULTS: dict[str, Any] = {
    "r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.0,
    "target_modules": "all-linear",
}


def lora_config(options: dict[str, Any] | None) -> Any:
    """A peft `LoraConfig` for a causal LM from `LoraConfig` keyword arguments over LORA_DEFAULTS; None = none."""
    if options is None:
        return None
    from peft import LoraConfig

    known = {f.name for f in dataclasses.fields(LoraConfig)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(
            f"lora: unknown LoraConfig field(s) {unknown}; use peft's LoraConfig names (r, lora_alpha, "
            "lora_dropout, target_modules, ...)"
        )
    return LoraConfig(**{**LORA_DEFAULTS, **options, "task_type": "CAUSAL_LM"})


def merged_model(model: Any) -> Any:
    """The plain model: a peft model's adapters merged into its base weights (in place), any other model as is."""
    from peft import PeftModel

    return model.merge_and_unload() if isinstance(model, PeftModel) else model


def save_trained(trainer: Any, folder: str | os.PathLike) -> None:
    """Save a trainer's model, LoRA adapters merged into it, and its tokenizer to `folder`."""
    # The trainer then saves the plain model as it saves any model (config, weights, its training args).
    trainer.model = merged_model(trainer.accelerator.unwrap_model(trainer.model))
    trainer.save_model(str(folder))
    trainer.processing_class.save_pretrained(str(folder))
