"""A grpo stage: one curriculum stage of GRPO on the environment, from the previous stage's model.

python -m tasks.grpo --stage NAME [--params params.yaml] [--profile smoke]
"""

from __future__ import annotations

import functools
import logging
import sys
import time
from pathlib import Path

from tasks.params.sections import Params
from tasks.runtime.episodes import episode_env
from tasks.runtime.fingerprint import fingerprint, stage_code
from tasks.runtime.tracking import log_params, set_tags, write_metrics
from tasks.runtime.trainer_args import trainer_args
from wander.core.atomic_io import atomic_dir, clean_leftovers, write_json
from wander.core.pipeline_hooks import reply_budget
from wander.eval.curves import CURVE_FILE, curve_points

logger = logging.getLogger(__name__)


def run(params: Params, stage: str) -> dict:
    """Train one curriculum stage (resuming from its checkpoint), save <models>/grpo-<stage> atomically."""
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from wander import load_environment
    from wander.training import drop_checkpoints, train_resumable, trainer_spec
    from wander.training.curriculum import Curriculum
    from wander.training.learning_curve import LearningCurveCallback
    from wander.training.lora import lora_config, save_trained

    config, layout = params.grpo, params.layout
    if stage not in config.stages:
        raise ValueError(f"unknown grpo stage {stage!r}; params.yaml grpo.stages has {list(config.stages)}")
    out = Path(layout.models) / f"grpo-{stage}"
    clean_leftovers(out)  # a model-sized temporary of a save that was killed: gone before the training
    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)
    # The training env's settings: this env's blocks of the section and of the stage, over `env.<name>`.
    name = params.env.name
    stages = {key: s.curriculum_stage(name, config.env.get(name, {})) for key, s in config.stages.items()}
    start_model = Path(layout.models) / config.stages[stage].start
    if not start_model.is_dir():
        raise FileNotFoundError(f"grpo stage {stage!r} starts from {start_model}, which does not exist yet")
    # Episodes (seeds, strata, sides) are the generated train split's; each stage draws opponents in its range.
    env = load_environment(**params.env.kwargs(), specs_dir=layout.datasets)
    # Live at once: a generation batch of episodes, plus one shared prefix per group (decision rollouts).
    batch, group = stages[stage].batch_size, stages[stage].num_generations or config.num_generations
    rollout = config.rollout()
    # A null budget is the env's, resolved where the env is built and logged beside the null the params say; the
    # trainer, the curve and the resume fingerprint see the number.
    curve_tokens = reply_budget(env, config.max_completion_length)
    budget = rollout.completion_budget(env, config.max_completion_length)
    config = config.model_copy(update={"max_completion_length": budget})
    log_params({"resolved/grpo/max_completion_length": budget})
    env = episode_env(params.env, env, live=batch + batch // group)
    args = trainer_args(GRPOConfig, config, output_dir=str(Path(layout.work) / "grpo"), save_total_limit=1)
    index = list(stages).index(stage)
    curriculum = Curriculum(list(stages.values()))
    start = time.monotonic()
    spec = trainer_spec(
        GRPOTrainer,
        args=args,
        rollout=rollout,
        peft_config=lora_config(config.lora),
    )
    trainer = curriculum.trainer(env, spec, index, model=str(start_model))
    if config.curve_every:  # the curve plays the env's own settings, not the stage's opponent range
        curve_env = load_environment(**params.env.kwargs())
        curve = LearningCurveCallback(  # greedy replies as long as a rollout's model turns: never cut shorter
            curve_env,
            trainer,
            config.curve_every,
            max_new_tokens=curve_tokens,
            keep_best=config.keep_best,
        )
        trainer.add_callback(curve)
    # The env and the episode specs decide the episodes too; where they are played does not (they are the same).
    # And the code: checkpoints of other code are never resumed.
    inputs = (config, params.env.kwargs(), stage)
    code = stage_code("tasks.grpo", params.env.name)
    result = train_resumable(
        trainer, fingerprint=fingerprint(inputs, start_model, layout.datasets, code=code)
    )
    with atomic_dir(out) as tmp:
        save_trained(trainer, tmp)  # LoRA adapters merged: every later stage loads a plain model
        # The stage's learning curve travels with its model (log_history is restored on resume: never partial).
        write_json(tmp / CURVE_FILE, curve_points(trainer.state.log_history))
    # Only now: a stop during the merge or the save resumes from the last checkpoint, not from step 0.
    drop_checkpoints(trainer.args.output_dir)
    seconds = time.monotonic() - start
    steps = trainer.state.global_step
    logged = [h for h in trainer.state.log_history if "reward" in h]
    metrics = {  # the file's name says the stage: a string here would be one more `dvc metrics show` column
        "steps": steps,
        "seconds": round(seconds, 1),
        "seconds_per_step": round(seconds / max(steps, 1), 3),
        "final_reward": logged[-1]["reward"] if logged else None,
        "train_loss": result.training_loss,
    }
    kept = [h for h in trainer.state.log_history if "curve_best/step" in h]
    if kept:  # the saved model is this step's (keep_best), not necessarily the last one's
        metrics["kept_step"] = int(kept[-1]["curve_best/step"])
    write_metrics(Path(layout.metrics) / f"grpo-{stage}.json", metrics)
    set_tags({"wander.parent": str(start_model), "wander.model.dir": str(out), "wander.grpo.stage": stage})
    logger.info(
        "grpo@%s: %d steps in %.0f s, final reward %s", stage, steps, seconds, metrics["final_reward"]
    )
    return metrics


def main(argv: list[str] | None = None) -> int:
    """`--stage NAME` picks the curriculum stage; the other options are every stage's."""
    from tasks.runtime.stage import stage_main

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
