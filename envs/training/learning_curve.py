"""A learning curve during training: every N steps, the env's small frozen suite, played greedily, logged as metrics.

The metrics go through `trainer.log`, so they reach every reporting integration (MLflow step metrics) and the
trainer's `log_history`, next to the reward. The suite is the environment's `curve_metrics(policy)`: for
tic-tac-toe, exact greedy results against perfect minimax and a random player (no sampling noise).
"""

from __future__ import annotations

import time
from typing import Any

from transformers import TrainerCallback

from envs.environment import Environment


class LearningCurveCallback(TrainerCallback):
    """Logs `env.curve_metrics` of the trainer's current model, greedy, at step 0 and every `every` steps."""

    def __init__(self, env: Environment, trainer: Any, every: int, max_new_tokens: int = 16):
        if every < 1:
            raise ValueError(f"every must be at least 1, got {every}")
        self.env, self.trainer, self.every, self.max_new_tokens = env, trainer, every, max_new_tokens
        self.history: list[dict[str, float]] = []

    def measure(self) -> dict[str, float]:
        """The env's curve metrics for the model as it is now, prefixed `curve/`."""
        from envs.policies.transformers_policy import TransformersPolicy

        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        was_training = model.training
        model.eval()
        start = time.monotonic()
        try:
            policy = TransformersPolicy(
                model, self.trainer.processing_class, greedy=True, max_new_tokens=self.max_new_tokens
            )
            values = self.env.curve_metrics(policy)
        finally:
            model.train(was_training)
        metrics = {f"curve/{k}": float(v) for k, v in values.items()}
        metrics["curve/seconds"] = round(time.monotonic() - start, 2)
        self.history.append({"step": self.trainer.state.global_step, **metrics})
        return metrics

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        """The starting point of the curve (the start model), unless resuming mid-stage."""
        if state.global_step == 0:
            self.trainer.log(self.measure())
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        """Every `every` steps and at the last step."""
        if state.global_step % self.every == 0 or state.global_step >= state.max_steps:
            self.trainer.log(self.measure())
        return control
