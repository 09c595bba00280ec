"""A learning curve during training: every N steps, the env's small frozen suite, played greedily, logged as metrics.

The metrics go through `trainer.log`, so they reach every reporting integration (MLflow step metrics) and the
trainer's `log_history`, next to the reward. The suite is the environment's `curve_metrics(policy)`: for
tic-tac-toe, exact greedy results against perfect minimax and a random player (no sampling noise).

With `keep_best`, the model of the best point by `env.curve_score` (the start model included) is what training
leaves in the trainer: measured, GRPO at a constant learning rate swings between points (losses to perfect
minimax 0 -> 0.18 -> 0 within 60 steps), so the last step is not the best one. The best point is written to the
trainer's output folder as it is found, so a resumed run keeps it: its weights and its record (step, score) in one
folder, `curve_best/`, replaced whole (a kill never pairs new weights with an old record).

With `until_unbeaten` (an env with `LosingLines`), training stops after the first point where no line beats the
model: an opponent that knows its every move wins on no side. The env's `curve_score` ranks such a point first
(tic-tac-toe's does), so `keep_best` keeps it.

On several processes the main one alone plays the suite and keeps the best point (the replicas' weights are the same;
only the main process saves the model); the others go on to the next step's collectives and wait there for it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from wander.core.atomic_io import atomic_dir, clean_leftovers
from wander.core.capabilities import LosingLines, require
from wander.core.environment import Environment

BEST_DIR = "curve_best"  # in the trainer's output folder: the best point so far, as one unit
BEST_WEIGHTS = "model.safetensors"
BEST_FILE = "best.json"


class LearningCurveCallback(TrainerCallback):
    """Logs `env.curve_metrics` of the trainer's current model, greedy, at step 0 and every `every` steps."""

    def __init__(
        self,
        env: Environment,
        trainer: Any,
        every: int,
        max_new_tokens: int = 16,
        keep_best: bool = False,
        until_unbeaten: bool = False,
        start: dict[str, float] | None = None,
    ):
        if every < 1:
            raise ValueError(f"every must be at least 1, got {every}")
        if until_unbeaten:
            require(
                env, LosingLines, "until_unbeaten (a stage ends when no line beats the model)", "set it false"
            )
        self.env, self.trainer, self.every, self.max_new_tokens = env, trainer, every, max_new_tokens
        self.keep_best, self.until_unbeaten = keep_best, until_unbeaten
        # The start model's point as the stage that saved it measured it (the same curve): step 0 without a new one.
        self.start = start
        self.unbeaten = False  # the last point's model: no line beats it (with until_unbeaten)
        self.history: list[dict[str, float]] = []
        self.best: dict[str, float] | None = None  # {"step": N, "score": x} of the best point so far
        self.folder = Path(trainer.args.output_dir)  # on_train_begin: the folder the run really writes to

    def measure(self) -> dict[str, float]:
        """The env's curve metrics for the model as it is now, prefixed `curve/`."""
        from wander.policies.transformers_policy import TransformersPolicy

        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        was_training = model.training
        model.eval()
        start = time.monotonic()
        try:
            policy = TransformersPolicy(
                model,
                self.trainer.processing_class,
                greedy=True,
                max_new_tokens=self.max_new_tokens,
                bf16=self.trainer.args.bf16,
            )
            values = self.env.curve_metrics(policy)
            if self.until_unbeaten:  # the same policy object: an env may reuse the replies the curve asked
                self.unbeaten = not self.env.losing_positions(policy)
        finally:
            model.train(was_training)
        metrics = {f"curve/{k}": float(v) for k, v in values.items()}
        metrics["curve/seconds"] = round(time.monotonic() - start, 2)
        if self.until_unbeaten:
            metrics["curve/unbeaten"] = float(self.unbeaten)
        if self.keep_best:
            metrics["curve/score"] = float(self.env.curve_score(values))
        return self._record(metrics)

    def _record(self, metrics: dict[str, float]) -> dict[str, float]:
        step = self.trainer.state.global_step
        if self.keep_best and (self.best is None or metrics["curve/score"] > self.best["score"]):
            self.best = {"step": step, "score": metrics["curve/score"]}
            self._save_best(self.trainer.accelerator.unwrap_model(self.trainer.model))
        self.history.append({"step": step, **metrics})
        return metrics

    def reuse_start(self) -> dict[str, float]:
        """Step 0 from `start` (no model calls): its values, no time spent, and whether no line beats it."""
        metrics = {f"curve/{k}": float(v) for k, v in self.start.items() if k != "step"}
        metrics["curve/seconds"] = 0.0
        if self.until_unbeaten:
            self.unbeaten = bool(self.start.get("unbeaten"))
            metrics["curve/unbeaten"] = float(self.unbeaten)
        if self.keep_best and "curve/score" not in metrics:
            values = {k: v for k, v in self.start.items() if k not in ("step", "seconds", "unbeaten")}
            metrics["curve/score"] = float(self.env.curve_score(values))
        return self._record(metrics)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        """The starting point of the curve (the start model), unless resuming mid-stage."""
        self.folder = Path(args.output_dir)
        if not state.is_world_process_zero:
            return control
        if self.keep_best:
            clean_leftovers(self.folder / BEST_DIR)  # a save the last run was killed in
            if (self.folder / BEST_DIR / BEST_FILE).exists():  # a resumed run: its best so far
                self.best = json.loads((self.folder / BEST_DIR / BEST_FILE).read_text())
        if state.global_step == 0:
            self.trainer.log(self.measure() if self.start is None else self.reuse_start())
        # The trainer checks a stop only after a step: a start no line beats trains one step, and keep_best weighs
        # both points.
        control.should_training_stop = self.unbeaten
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        """Every `every` steps, at the last step and at a stop; with `until_unbeaten`, stop where no line beats
        the model."""
        if not state.is_world_process_zero:
            return control
        if (
            state.global_step % self.every == 0
            or state.global_step >= state.max_steps
            or control.should_training_stop
        ):
            self.trainer.log(self.measure())
            control.should_training_stop = control.should_training_stop or self.unbeaten
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        """With `keep_best`, leave the best point's weights in the model (and say which step they are from)."""
        if self.keep_best and self.best is not None and state.is_world_process_zero:
            if self.best["step"] != state.global_step:
                from safetensors.torch import load_model

                load_model(
                    self.trainer.accelerator.unwrap_model(self.trainer.model),
                    self.folder / BEST_DIR / BEST_WEIGHTS,
                )
            self.trainer.log(
                {"curve_best/step": float(self.best["step"]), "curve_best/score": self.best["score"]}
            )
        return control

    def _save_best(self, model: Any) -> None:
        from safetensors.torch import save_model  # handles tied weights, unlike save_file

        # Weights and record in one folder renamed into place: a kill mid-save leaves the previous pair whole.
        with atomic_dir(self.folder / BEST_DIR) as tmp:
            save_model(model, str(tmp / BEST_WEIGHTS))
            (tmp / BEST_FILE).write_text(json.dumps(self.best))
