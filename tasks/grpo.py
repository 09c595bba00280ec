"""A grpo stage: one curriculum stage of GRPO on the environment, from the previous stage's model.

python -m tasks.grpo --stage NAME [--params params.yaml] [--profile smoke]
"""

from __future__ import annotations

import functools
import logging
import sys
import time
from pathlib import Path

from tasks.atomic import atomic_dir
from tasks.fingerprint import fingerprint
from tasks.grpo_config import GRPOStageConfig
from tasks.sft import cpu_args
from tasks.tracking import set_tags, write_metrics

logger = logging.getLogger(__name__)


def run(config: GRPOStageConfig, stage: str) -> dict:
    """Train one curriculum stage (resuming from its checkpoint), save <models>/grpo-<stage> atomically."""
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from envs import load_environment
    from envs.training import CurriculumStage, train_resumable, trainer_spec
    from envs.training.curriculum import Curriculum

    if stage not in config.stages:
        raise ValueError(f"unknown grpo stage {stage!r}; params.yaml grpo.stages has {list(config.stages)}")
    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)
    names = list(config.stages)
    index = names.index(stage)
    settings = {k: v for k, v in config.stages[stage].items() if k != "start"}
    settings.setdefault("batch_size", config.batch_size)
    settings.setdefault("num_generations", config.num_generations)
    if config.invalid_penalty is not None:
        settings["env_kwargs"] = {"invalid_penalty": config.invalid_penalty, **settings.get("env_kwargs", {})}
    stages = [CurriculumStage(name=n, **({**settings} if n == stage else {})) for n in names]
    start_model = Path(config.models_dir) / config.stages[stage]["start"]
    if not start_model.is_dir():
        raise FileNotFoundError(f"grpo stage {stage!r} starts from {start_model}, which does not exist yet")
    env_settings = {k: v for k, v in config.env.items() if k != "name"}
    env = load_environment(config.env["name"], **env_settings)
    args = cpu_args(
        GRPOConfig,
        output_dir=str(Path(config.work_dir) / "grpo"),
        per_device_train_batch_size=config.per_device_train_batch_size,
        num_generations=config.num_generations,
        max_completion_length=config.max_completion_length,
        learning_rate=config.learning_rate,
        lr_scheduler_type=config.lr_scheduler_type,
        warmup_steps=config.warmup_steps,
        num_iterations=config.num_iterations,
        logging_steps=config.logging_steps,
        save_steps=config.save_steps,
        save_total_limit=1,
        seed=config.seed,
    )
    curriculum = Curriculum(stages)
    start = time.monotonic()
    trainer = curriculum.trainer(env, trainer_spec(GRPOTrainer, args=args), index, model=str(start_model))
    result = train_resumable(trainer, fingerprint=fingerprint((config, stage), start_model))
    out = Path(config.models_dir) / f"grpo-{stage}"
    with atomic_dir(out) as tmp:
        trainer.save_model(str(tmp))
        trainer.processing_class.save_pretrained(str(tmp))
    seconds = time.monotonic() - start
    steps = trainer.state.global_step
    logged = [h for h in trainer.state.log_history if "reward" in h]
    metrics = {
        "stage": stage,
        "steps": steps,
        "seconds": round(seconds, 1),
        "seconds_per_step": round(seconds / max(steps, 1), 3),
        "final_reward": logged[-1]["reward"] if logged else None,
        "train_loss": result.training_loss,
    }
    write_metrics(Path(config.metrics_dir) / f"grpo-{stage}.json", metrics)
    set_tags({"wander.parent": str(start_model), "wander.model.dir": str(out), "wander.grpo.stage": stage})
    logger.info(
        "grpo@%s: %d steps in %.0f s, final reward %s", stage, steps, seconds, metrics["final_reward"]
    )
    return metrics


def main(argv: list[str] | None = None) -> int:
    """`--stage NAME` picks the curriculum stage; the other options are every stage's."""
    from tasks.stage import stage_main

    argv = list(sys.argv[1:] if argv is None else argv)
    if "--stage" not in argv or argv.index("--stage") + 1 >= len(argv):
        print("grpo: error: --stage NAME is required (a key of params.yaml grpo.stages)", file=sys.stderr)
        return 2
    i = argv.index("--stage")
    stage = argv[i + 1]
    del argv[i : i + 2]
    return stage_main("grpo", functools.partial(run, stage=stage), argv, run_name=f"grpo@{stage}")


if __name__ == "__main__":
    sys.exit(main())
