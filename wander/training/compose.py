"""`env >> trainer`: an environment composed with a TRL trainer gives the ready trainer.

    from trl import GRPOConfig, GRPOTrainer
    from wander.training import trainer_spec

    trainer = env >> trainer_spec(GRPOTrainer, model=path, args=GRPOConfig(...))
    trainer.train()

A TRL trainer needs its dataset and reward functions when it is constructed, and those are what the
environment supplies, so the right-hand side is the trainer *to be built*: `trainer_spec(Trainer, **kwargs)`.
`compose(env, trainer, **kwargs)` is the same without the operator, and also takes `functools.partial(Trainer, ...)`
or the bare class. What each trainer gets from the env:

- GRPOTrainer: whole episodes through a multi-turn `rollout_func` (tool envs: TRL's `environment_factory`),
- RLOOTrainer: single-turn episodes scored through reward functions,
- DPOTrainer: preference pairs mined from groups of the model's own rollouts,
- SFTTrainer: filtered teacher trajectories, one conversation per episode, assistant-only loss.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only for annotations
    from wander.core.environment import Environment


@dataclass
class TrainerSpec:
    """A TRL trainer class and the keyword arguments to build it with, once an environment is attached."""

    trainer_cls: type
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __rrshift__(self, env: Environment) -> Any:
        """`env >> spec`: the trainer built on `env`."""
        return compose(env, self)

    def __repr__(self) -> str:
        return f"trainer_spec({self.trainer_cls.__name__}, {', '.join(sorted(self.kwargs))})"


def trainer_spec(trainer_cls: type, model: Any = None, /, **kwargs: Any) -> TrainerSpec:
    """The right-hand side of `env >> ...`: a trainer class with its arguments (model, args, config objects)."""
    if not isinstance(trainer_cls, type):
        raise TypeError(f"trainer_spec takes a trainer class such as GRPOTrainer, got {trainer_cls!r}")
    if model is not None:
        kwargs["model"] = model
    return TrainerSpec(trainer_cls, kwargs)


def compose(env: Environment, trainer: Any, /, **kwargs: Any) -> Any:
    """A ready TRL trainer that trains on `env`; `trainer` is a class, a `trainer_spec` or a `functools.partial`."""
    trainer_cls, kwargs = _resolve(trainer, kwargs)
    if "model" not in kwargs:
        raise TypeError(
            f"composing {env.name} with {trainer_cls.__name__} needs a model (a path, hub id or model)"
        )
    return _builder(trainer_cls)(env, trainer_cls, **kwargs)


def _resolve(trainer: Any, kwargs: dict[str, Any]) -> tuple[type, dict[str, Any]]:
    if isinstance(trainer, TrainerSpec):
        return trainer.trainer_cls, {**trainer.kwargs, **kwargs}
    if isinstance(trainer, functools.partial) and isinstance(trainer.func, type):
        if trainer.args:
            raise TypeError(
                "pass the trainer's arguments by keyword in functools.partial (model=..., args=...)"
            )
        return trainer.func, {**trainer.keywords, **kwargs}
    if isinstance(trainer, type):
        return trainer, dict(kwargs)
    if hasattr(trainer, "train") and hasattr(trainer, "args"):
        raise TypeError(
            f"env >> {type(trainer).__name__}(...) cannot work: a TRL trainer takes its dataset and reward functions "
            f"when it is built, and those come from the env. Write env >> trainer_spec({type(trainer).__name__}, "
            "model=..., args=...) instead"
        )
    raise TypeError(
        f"cannot compose an environment with {trainer!r}; use trainer_spec(GRPOTrainer, model=..., ...)"
    )


def _builder(trainer_cls: type) -> Callable[..., Any]:
    from trl import DPOTrainer, GRPOTrainer, RLOOTrainer, SFTTrainer

    if issubclass(trainer_cls, GRPOTrainer):
        from wander.training.grpo import grpo_trainer

        return grpo_trainer
    if issubclass(trainer_cls, RLOOTrainer):
        from wander.training.rloo import rloo_trainer

        return rloo_trainer
    if issubclass(trainer_cls, DPOTrainer):
        from wander.training.preferences import dpo_trainer

        return dpo_trainer
    if issubclass(trainer_cls, SFTTrainer):
        from wander.training.sft_data import sft_trainer

        return sft_trainer
    raise TypeError(
        f"no composition of environments with {trainer_cls.__name__}; supported: GRPOTrainer, RLOOTrainer, "
        "DPOTrainer, SFTTrainer (and their subclasses)"
    )
