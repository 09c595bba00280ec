"""A GRPO curriculum: a list of stages (opponents, temperature, steps, batch) run one after another.

Each stage is its own GRPO run on a copy of the environment with the stage's settings, starting from the previous
stage's final model, with checkpoints in its own folder, so a killed curriculum resumes inside the stage it was
in. Batches are stratified (every difficulty stratum in every batch). `next_stage(trainer_state, metrics)` is
asked at every log; when it says yes the stage ends early: the hook for adaptive curricula.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from wander.core.environment import Environment
from wander.training.checkpoints import train_resumable
from wander.training.compose import TrainerSpec, compose, trainer_spec
from wander.training.curriculum_config import CurriculumStage
from wander.training.lora import save_trained

DONE_FILE = "stage_done.json"
FINAL_DIR = "final"


class Curriculum:
    """Stages of GRPO training, followed in order; `next_stage` decides when to leave a stage early."""

    def __init__(
        self,
        stages: Sequence[CurriculumStage],
        *,
        window: int = 5,
        next_stage: Callable[[Any, dict[str, float]], bool] | None = None,
    ):
        if not stages:
            raise ValueError("a curriculum needs at least one stage")
        names = [s.name for s in stages]
        if len(set(names)) != len(names):
            raise ValueError(f"stage names must be unique, got {names}")
        self.stages = list(stages)
        self.window = window
        self.current = 0
        self._custom_next_stage = next_stage

    def stage_env(self, env: Environment, index: int) -> Environment:
        """A copy of `env` with the stage's settings (opponent range and env_kwargs) in its config."""
        stage = self.stages[index]
        changes = dict(stage.env_kwargs)
        if stage.random_move_prob is not None:
            changes["random_move_prob"] = stage.random_move_prob
        if not changes:
            return env
        rebuild = getattr(env, "with_settings", None)
        if rebuild is not None:  # an env that is more than its config (one served elsewhere) rebuilds itself
            return rebuild(**changes)
        config = getattr(env, "config", None)
        if config is None or not dataclasses.is_dataclass(config):
            raise TypeError(
                f"stage {stage.name!r} changes {sorted(changes)}, but {env.name} has no dataclass `config` to "
                "rebuild it from; give the env a config or leave these stage settings unset"
            )
        return type(env)(dataclasses.replace(config, **changes))

    def stage_args(self, args: Any, index: int) -> Any:
        """The trainer config of a stage: its temperature, steps, batch and output folder."""
        stage = self.stages[index]
        per_device = min(args.per_device_train_batch_size, stage.batch_size)
        step_batch = per_device * args.world_size
        if stage.batch_size % step_batch:
            raise ValueError(
                f"stage {stage.name!r}: batch_size {stage.batch_size} must divide by per_device_train_batch_size "
                f"{per_device} x {args.world_size} processes"
            )
        changes = {
            "temperature": stage.temperature,
            "max_steps": stage.max_steps,
            "per_device_train_batch_size": per_device,
            # A generation batch is one optimizer step's worth of episodes (reused for num_iterations steps).
            "gradient_accumulation_steps": stage.batch_size // step_batch,
            "generation_batch_size": stage.batch_size,
            "steps_per_generation": None,
            "output_dir": self.stage_dir(args.output_dir, index),
        }
        if stage.num_generations is not None:
            changes["num_generations"] = stage.num_generations
        if stage.learning_rate is not None:
            changes["learning_rate"] = stage.learning_rate
        if stage.beta is not None:
            changes["beta"] = stage.beta
        return dataclasses.replace(args, **changes)

    def stage_dir(self, output_dir: str | os.PathLike, index: int) -> str:
        """Where a stage writes its checkpoints and final model."""
        return os.path.join(output_dir, f"{index:02d}-{self.stages[index].name}")

    def next_stage(self, trainer_state: Any, metrics: dict[str, float]) -> bool:
        """Whether to leave the current stage now: every `advance_when` metric averages its threshold lately."""
        if self._custom_next_stage is not None:
            return bool(self._custom_next_stage(trainer_state, metrics))
        thresholds = self.stages[self.current].advance_when
        if not thresholds:
            return False
        history = [h for h in trainer_state.log_history if all(name in h for name in thresholds)]
        if len(history) < self.window:
            return False
        recent = history[-self.window :]
        return all(sum(h[name] for h in recent) / len(recent) >= limit for name, limit in thresholds.items())

    def trainer(self, env: Environment, spec: TrainerSpec, index: int, model: Any = None) -> Any:
        """The ready GRPO trainer of one stage (`model` defaults to the previous stage's final model)."""
        kwargs = dict(spec.kwargs)
        args = kwargs.pop("args", None)
        if args is None:
            raise ValueError(
                "a curriculum needs the trainer spec's args=GRPOConfig(output_dir=...) to derive stages from"
            )
        if model is None:
            model = kwargs.pop("model") if index == 0 else self.final_model(args.output_dir, index - 1)
        kwargs.pop("model", None)
        self.current = index
        stage_spec = trainer_spec(spec.trainer_cls, model=model, args=self.stage_args(args, index), **kwargs)
        trainer = compose(self.stage_env(env, index), stage_spec)
        trainer.add_callback(CurriculumCallback(self))
        return trainer

    def final_model(self, output_dir: str | os.PathLike, index: int) -> str:
        """The final model folder of a finished stage."""
        path = Path(self.stage_dir(output_dir, index)) / FINAL_DIR
        if not (path.parent / DONE_FILE).exists():
            raise FileNotFoundError(
                f"stage {self.stages[index].name!r} has not finished: no {path.parent / DONE_FILE}"
            )
        return str(path)

    def train(self, env: Environment, spec: TrainerSpec) -> str:
        """Run every stage not yet finished (resuming a killed one from its checkpoint); return the final model."""
        if spec.kwargs.get("args") is None:
            raise ValueError(
                "a curriculum needs the trainer spec's args=GRPOConfig(output_dir=...) to derive stages from"
            )
        output_dir = spec.kwargs["args"].output_dir
        for index in range(len(self.stages)):
            stage_dir = Path(self.stage_dir(output_dir, index))
            if (stage_dir / DONE_FILE).exists():
                continue
            trainer = self.trainer(env, spec, index)
            result = train_resumable(trainer)
            save_trained(trainer, stage_dir / FINAL_DIR)
            summary = {"stage": self.stages[index].to_dict(), "global_step": trainer.state.global_step}
            summary["metrics"] = result.metrics
            (stage_dir / DONE_FILE).write_text(json.dumps(summary, indent=2, default=str) + "\n")
        return self.final_model(output_dir, len(self.stages) - 1)


class CurriculumCallback(TrainerCallback):
    """Ends a stage (saving a checkpoint) when the curriculum's `next_stage` hook says so."""

    def __init__(self, curriculum: Curriculum):
        self.curriculum = curriculum

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> Any:
        """Ask the hook after every log."""
        if logs and self.curriculum.next_stage(state, logs):
            control.should_training_stop = True
            control.should_save = True
        return control
