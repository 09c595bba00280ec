"""An environment's rubric as TRL reward functions: the episode reward, plus every rubric function logged."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from wander.core.environment import Environment
from wander.training.args import replace_args

EPISODE = "episode"  # TRL logs it as rewards/episode/mean: the rubric's weighted total

# score_batch(**trainer_kwargs) -> one (reward, values) pair per completion
BatchScoreFn = Callable[..., list[tuple[float, dict[str, float]]]]


class _Scores:
    """Scores a batch once for all the reward functions TRL calls on it with the same arguments."""

    def __init__(self, score_batch: BatchScoreFn):
        self.score_batch = score_batch
        self._key: str | None = None
        self._scores: list[tuple[float, dict[str, float]]] = []

    def __call__(self, kwargs: dict[str, Any]) -> list[tuple[float, dict[str, float]]]:
        if "episode_reward" in kwargs:  # a rollout_func already played and scored the episodes
            return list(zip(kwargs["episode_reward"], kwargs["episode_values"], strict=True))
        # Not id(): a batch's lists may be freed and their ids reused by the next batch.
        key = json.dumps(
            [
                kwargs.get("completions"),
                kwargs.get("episode_spec"),
                [id(e) for e in kwargs.get("environments") or []],
            ],
            default=repr,
        )
        if key != self._key:
            self._scores = self.score_batch(**kwargs)
            self._key = key
        return self._scores


class EpisodeReward:
    """TRL reward function: the rubric's total reward of each episode (weight 1)."""

    def __init__(self, scores: _Scores):
        self.__name__ = EPISODE
        self.scores = scores

    def __call__(self, **kwargs: Any) -> list[float]:
        """One reward per completion."""
        return [reward for reward, _ in self.scores(kwargs)]


class RubricValue:
    """TRL reward function reporting one rubric function (weight 0: logged as rewards/<name>/mean, not summed)."""

    def __init__(self, name: str, scores: _Scores):
        self.__name__ = name
        self.scores = scores

    def __call__(self, **kwargs: Any) -> list[float | None]:
        """One value per completion; None (ignored by TRL's means) where the episode errored before it."""
        return [values.get(self.__name__) for _, values in self.scores(kwargs)]


def rubric_reward_funcs(
    env: Environment, score_batch: BatchScoreFn | None = None
) -> tuple[list[Callable], list[float]]:
    """Reward functions and weights for a TRL trainer: the episode reward (1) and each rubric function (0).

    The rewards come from a rollout_func's `episode_reward`/`episode_values` fields when present, else from
    `score_batch(**kwargs)`, called once per batch.
    """
    names = env.rubric.names
    if EPISODE in names:
        raise ValueError(
            f"{env.name}'s rubric has a function named {EPISODE!r}; rename it (Rubric.add(name=...))"
        )
    scores = _Scores(score_batch or _no_scorer)
    funcs: list[Callable] = [EpisodeReward(scores)] + [RubricValue(name, scores) for name in names]
    return funcs, [1.0] + [0.0] * len(names)


def _no_scorer(**_: Any) -> list:
    raise ValueError("no episode_reward/episode_values from the rollout and no scorer to compute them")


def rubric_args(args: Any, weights: list[float]) -> Any:
    """A copy of a TRL config with the rubric's reward weights and the env's own (stratified) row order."""
    if args.reward_weights is not None and list(args.reward_weights) != weights:
        raise ValueError(
            "reward_weights is set on the trainer config, but an env composition takes its weights from the env's "
            "rubric; leave reward_weights unset and weight the rubric's functions instead (Rubric.add(func, weight))"
        )
    # The dataset is already a seeded stratified shuffle; TRL's shuffle would break the per-batch balance.
    return replace_args(args, reward_weights=weights, shuffle_dataset=False)
