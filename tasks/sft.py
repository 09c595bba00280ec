"""The sft stage: TRL SFTTrainer warm-up of the base model on the curated teacher games.

python -m tasks.sft [--params params.yaml] [--profile smoke]
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from pathlib import Path

from tasks.atomic import atomic_dir, read_jsonl
from tasks.fingerprint import fingerprint
from tasks.sections import Params, Section
from tasks.tracking import set_tags, write_metrics

logger = logging.getLogger(__name__)


def trainer_args(config_cls: type, section: Section, **fixed: object) -> object:
    """A TRL config from a params section: every key named like one of its fields, plus `fixed`, CPU-ready."""
    names = {f.name for f in dataclasses.fields(config_cls)}
    return cpu_args(config_cls, **{k: v for k, v in section.model_dump().items() if k in names}, **fixed)


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


def run(params: Params) -> dict:
    """Train, save the final model atomically under <models>/sft, write and return metrics."""
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from envs import load_environment
    from envs.training import train_resumable

    config, layout = params.sft, params.layout
    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)
    rows = read_jsonl(Path(layout.sft) / "train.jsonl")
    if not rows:
        raise ValueError(f"{layout.sft}/train.jsonl has no games; run the curate stage first")
    # One conversation per game, or per model turn when the env's turns read only the current position.
    env = load_environment(**params.env.kwargs())
    conversations = [c for r in rows for c in env.training_conversations(r["messages"])]
    dataset = Dataset.from_list([{"messages": c} for c in conversations])
    args = trainer_args(
        SFTConfig,
        config,
        output_dir=str(Path(layout.work) / "sft"),
        save_total_limit=1,
        assistant_only_loss=True,  # learn the model's turns (end-of-turn token included), read the env's
    )
    start = time.monotonic()
    trainer = SFTTrainer(model=layout.base_model, args=args, train_dataset=dataset)
    result = train_resumable(
        trainer, fingerprint=fingerprint((config, params.env), layout.base_model, layout.sft)
    )
    out = Path(layout.models) / "sft"
    with atomic_dir(out) as tmp:
        trainer.save_model(str(tmp))
        trainer.processing_class.save_pretrained(str(tmp))
    metrics = {
        "games": len(rows),
        "examples": len(conversations),
        "steps": trainer.state.global_step,
        "train_loss": result.training_loss,
        "seconds": round(time.monotonic() - start, 1),
    }
    write_metrics(Path(layout.metrics) / "sft.json", metrics)
    set_tags({"wander.parent": layout.base_model, "wander.model.dir": str(out)})
    logger.info("sft: %d games, %d steps, loss %.4f", len(rows), metrics["steps"], metrics["train_loss"])
    return metrics


if __name__ == "__main__":
    from tasks.stage import stage_main

    sys.exit(stage_main("sft", run))
