"""The sft stage: TRL SFTTrainer warm-up of the base model on the curated teacher games.

python -m tasks.sft [--params params.yaml] [--profile smoke]
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from tasks.atomic import atomic_dir, read_jsonl
from tasks.fingerprint import fingerprint
from tasks.sft_config import SFTStageConfig
from tasks.tracking import set_tags, write_metrics

logger = logging.getLogger(__name__)


def cpu_args(config_cls: type, **kwargs: object) -> object:
    """A TRL config that works on CPU (no bf16, no gradient checkpointing), logging to the active MLflow run."""
    import torch

    report_to = ["mlflow"] if "mlflow" in sys.modules and sys.modules["mlflow"].active_run() else []
    return config_cls(
        bf16=False,
        activation_checkpointing=False,
        use_cpu=not torch.cuda.is_available(),
        report_to=report_to,
        disable_tqdm=True,
        **kwargs,
    )


def run(config: SFTStageConfig) -> dict:
    """Train, save the final model atomically under <models>/sft, write and return metrics."""
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from envs.training import train_resumable

    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)
    rows = read_jsonl(Path(config.data_dir) / "train.jsonl")
    if not rows:
        raise ValueError(f"{config.data_dir}/train.jsonl has no games; run the curate stage first")
    dataset = Dataset.from_list([{"messages": r["messages"]} for r in rows])
    args = cpu_args(
        SFTConfig,
        output_dir=str(Path(config.work_dir) / "sft"),
        num_train_epochs=config.epochs,
        per_device_train_batch_size=config.batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        learning_rate=config.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=config.warmup_steps,
        logging_steps=config.logging_steps,
        save_steps=config.save_steps,
        save_total_limit=1,
        max_length=config.max_length,
        assistant_only_loss=True,  # learn the model's turns (end-of-turn token included), read the env's
        seed=config.seed,
    )
    start = time.monotonic()
    trainer = SFTTrainer(model=config.base_model, args=args, train_dataset=dataset)
    result = train_resumable(trainer, fingerprint=fingerprint(config, config.base_model, config.data_dir))
    out = Path(config.models_dir) / "sft"
    with atomic_dir(out) as tmp:
        trainer.save_model(str(tmp))
        trainer.processing_class.save_pretrained(str(tmp))
    metrics = {
        "games": len(rows),
        "steps": trainer.state.global_step,
        "train_loss": result.training_loss,
        "seconds": round(time.monotonic() - start, 1),
    }
    write_metrics(Path(config.metrics_dir) / "sft.json", metrics)
    set_tags({"wander.parent": config.base_model, "wander.model.dir": str(out)})
    logger.info("sft: %d games, %d steps, loss %.4f", len(rows), metrics["steps"], metrics["train_loss"])
    return metrics


if __name__ == "__main__":
    from tasks.stage import stage_main

    sys.exit(stage_main("sft", run))
