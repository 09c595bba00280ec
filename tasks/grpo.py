"""The grpo stage: the env's GRPO curriculum, each curriculum stage from the previous one's model.

python -m tasks.grpo [--params params.yaml] [--profile smoke]

Each curriculum stage saves `<layout.models>/grpo/<name>` atomically with the fingerprint of what it trained on (its
settings, its start model's content, the episodes and the code): a rerun keeps a stage whose fingerprint is
unchanged and trains from the first one that changed, so editing the last stage's steps retrains only that stage.
DVC keeps the folder between runs (`persist` in dvc.yaml) for that; a killed stage resumes from its checkpoint.
A later stage's learning curve starts at the point the stage before it kept (no second exact evaluation of one model),
and with `until_unbeaten` a start no line beats is kept as the stage's model, no step trained.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasks.params.sections import Params
from tasks.runtime.episodes import episode_env
from tasks.runtime.fingerprint import fingerprint, stage_code
from tasks.runtime.launch import process_index
from tasks.runtime.tracking import log_metrics, log_params, set_tags, write_metrics
from tasks.runtime.trainer_args import trainer_args
from wander.core.atomic_io import TEMP_NAME, atomic_dir, clean_leftovers, write_json
from wander.core.pipeline_hooks import reply_budget
from wander.eval.curves import CURVE_FILE, curve_points

if TYPE_CHECKING:  # the package wander.training imports TRL: loaded inside the training only
    from wander.training.curriculum_config import CurriculumStage

logger = logging.getLogger(__name__)

STAGE_FILE = "grpo_stage.json"
"""In each curriculum stage's model folder: the fingerprint it was trained with and its headline metrics."""

PartRun = Callable[[str], AbstractContextManager[Any]]


def run(params: Params, part_run: PartRun) -> dict:
    """Train every curriculum stage whose inputs changed, in order; return each stage's metrics by model row."""
    config, layout = params.grpo, params.layout
    stages = config.curriculum(config.env.get(params.env.name, {}))
    folders = config.stage_models(layout.models)
    out = Path(next(iter(folders.values()))).parent
    start = Path(layout.models) / config.start
    if not start.is_dir():
        raise FileNotFoundError(f"the GRPO curriculum starts from {start}, which does not exist yet")
    main = process_index() == 0  # on several processes, rank 0 writes the outputs
    # Folders of stages the curriculum no longer has (another env's): not this run's models.
    if main and out.is_dir():
        for entry in out.iterdir():  # a save's temporaries are each stage's to clean (or to put back)
            if entry.name not in stages and not TEMP_NAME.fullmatch(entry.name):
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    metrics = {}
    for index, (row, folder) in enumerate(folders.items()):
        metrics[row] = train_stage(params, stages, index, start, Path(folder), part_run)
        start = Path(folder)
    if main:
        write_metrics(Path(layout.metrics) / "grpo.json", metrics)
    return metrics


def train_stage(
    params: Params,
    stages: dict[str, CurriculumStage],
    index: int,
    start_model: Path,
    out: Path,
    part_run: PartRun,
) -> dict:
    """Train curriculum stage `index` from `start_model` into `out` (resuming from its checkpoint), unless `out`
    holds this very training's model (the same fingerprint); return its metrics."""
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from wander import load_environment
    from wander.training import drop_checkpoints, train_resumable, trainer_spec
    from wander.training.curriculum import Curriculum
    from wander.training.learning_curve import LearningCurveCallback
    from wander.training.lora import lora_config, save_trained
    from wander.training.processes import wait_for_everyone

    config, layout = params.grpo, params.layout
    name = list(stages)[index]
    main = process_index() == 0  # on several processes, rank 0 writes the models
    if main:
        clean_leftovers(out)  # a model-sized temporary of a save that was killed: gone before the training
    env = load_environment(**params.env.kwargs(), specs_dir=layout.datasets)
    # A null budget is the env's, resolved where the env is built and logged beside the null the params say; the
    # trainer, the curve and the fingerprint see the number.
    curve_tokens = reply_budget(env, config.max_completion_length)
    rollout = config.rollout()
    budget = rollout.completion_budget(env, config.max_completion_length)
    config = config.model_copy(update={"max_completion_length": budget})
    # What the stage trains on: its own settings and the section's (not the other stages'), the env, the start
    # model's content (an earlier stage retrained is a new start), the episodes and the code: checkpoints or models
    # of anything else are never reused.
    inputs = (config.model_copy(update={"stages": None}), stages[name], params.env.kwargs())
    code = stage_code("tasks.grpo", params.env.name)
    key = fingerprint(inputs, start_model, layout.datasets, code=code)
    done = json.loads((out / STAGE_FILE).read_text()) if (out / STAGE_FILE).is_file() else {}
    if done.get("fingerprint") == key:
        logger.info("grpo@%s: kept %s (trained on the same inputs)", name, out)
        return done["metrics"]
    # An earlier stage of this curriculum measured its model with this very curve (its fingerprint holds the
    # section's settings): that point is this stage's step 0, and a start no line beats is this stage's result.
    point = start_point(start_model) if index and config.curve_every else None
    if point is not None and config.until_unbeaten and point.get("unbeaten"):
        with part_run(f"grpo@{name}"):
            return keep_start(name, start_model, out, point, key)
    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)
    with part_run(f"grpo@{name}"):
        log_params({"resolved/grpo/max_completion_length": budget})
        # Episodes (seeds, strata, sides) are the generated train split's; each stage draws opponents in its range.
        batch, group = stages[name].batch_size, stages[name].num_generations or config.num_generations
        # Live at once: a generation batch of episodes, plus one shared prefix per group (decision rollouts).
        env = episode_env(params.env, env, live=batch + batch // group)
        work = str(Path(layout.work) / "grpo")
        args = trainer_args(
            GRPOConfig, config, output_dir=work, save_total_limit=1, use_vllm=config.vllm_mode is not None
        )
        start = time.monotonic()
        spec = trainer_spec(GRPOTrainer, args=args, rollout=rollout, peft_config=lora_config(config.lora))
        trainer = Curriculum(list(stages.values())).trainer(env, spec, index, model=str(start_model))
        # The curve plays the env's own settings, not the stage's opponent range, with greedy replies as long as a
        # rollout's model turns: never cut shorter.
        if config.curve_every:
            curve = LearningCurveCallback(
                load_environment(**params.env.kwargs()),
                trainer,
                config.curve_every,
                max_new_tokens=curve_tokens,
                keep_best=config.keep_best,
                until_unbeaten=config.until_unbeaten,
                start=point,
            )
            trainer.add_callback(curve)
        result = train_resumable(trainer, fingerprint=key)
        metrics = headline(trainer, result.training_loss, time.monotonic() - start)
        if main:
            with atomic_dir(out) as tmp:
                save_trained(trainer, tmp)  # LoRA adapters merged: every later stage loads a plain model
                # The learning curve travels with its model (log_history is restored on resume: never partial).
                write_json(tmp / CURVE_FILE, curve_points(trainer.state.log_history))
                write_json(tmp / STAGE_FILE, {"fingerprint": key, "metrics": metrics})
            # Only now: a stop during the merge or the save resumes from the last checkpoint, not from step 0.
            drop_checkpoints(trainer.args.output_dir)
            log_metrics(metrics)
            set_tags(
                {"wander.parent": str(start_model), "wander.model.dir": str(out), "wander.grpo.stage": name}
            )
        wait_for_everyone(trainer)  # the next curriculum stage starts from the model rank 0 saved
    logger.info(
        "grpo@%s: %d steps in %.0f s, final reward %s",
        name,
        metrics["steps"],
        metrics["seconds"],
        metrics["final_reward"],
    )
    return metrics


def start_point(start_model: Path) -> dict | None:
    """The learning-curve point of the model a curriculum stage saved in `start_model` (its kept step, else its
    last); None where no stage measured it (the SFT model)."""
    curve, stage = start_model / CURVE_FILE, start_model / STAGE_FILE
    if not (curve.is_file() and stage.is_file()):
        return None
    kept = json.loads(stage.read_text())["metrics"].get("kept_step")
    points = [p for p in json.loads(curve.read_text()) if kept is None or p["step"] == kept]
    return points[-1] if points else None


def keep_start(name: str, start_model: Path, out: Path, point: dict, key: str) -> dict:
    """`until_unbeaten` with a start no line beats: the stage's model is its start, its curve that one point."""
    metrics = {"steps": 0, "seconds": 0.0, "seconds_per_step": 0.0, "final_reward": None, "kept_step": 0}
    with atomic_dir(out) as tmp:  # one process: until_unbeaten is refused on several (preflight)
        shutil.copytree(start_model, tmp, dirs_exist_ok=True)
        write_json(tmp / CURVE_FILE, [{**point, "step": 0, "seconds": 0.0}])
        write_json(tmp / STAGE_FILE, {"fingerprint": key, "metrics": metrics})
    log_metrics(metrics)
    set_tags({"wander.parent": str(start_model), "wander.model.dir": str(out), "wander.grpo.stage": name})
    logger.info("grpo@%s: no line beats its start model (%s): kept as it is, no step", name, start_model)
    return metrics


def headline(trainer: Any, train_loss: float, seconds: float) -> dict:
    """A curriculum stage's few numbers: steps, time, the last logged reward, the loss and the kept step."""
    steps = trainer.state.global_step
    logged = [h for h in trainer.state.log_history if "reward" in h]
    metrics = {
        "steps": steps,
        "seconds": round(seconds, 1),
        "seconds_per_step": round(seconds / max(steps, 1), 3),
        "final_reward": logged[-1]["reward"] if logged else None,
        "train_loss": train_loss,
    }
    kept = [h for h in trainer.state.log_history if "curve_best/step" in h]
    if kept:  # the saved model is this step's (keep_best), not necessarily the last one's
        metrics["kept_step"] = int(kept[-1]["curve_best/step"])
    return metrics


def main(argv: list[str] | None = None) -> int:
    """Run the stage from the command line (one MLflow run per curriculum stage)."""
    from tasks.runtime.stage import stage_main

    return stage_main("grpo", run, argv, runs_per_part=True)


if __name__ == "__main__":
    sys.exit(main())
