"""RLOO on single-turn environments: the env's rubric becomes TRL reward functions."""

from __future__ import annotations

import functools
import json
from typing import Any

from wander.core.environment import Environment
from wander.core.policy import Reply
from wander.training.episode_data import rollout_dataset
from wander.training.rewards import rubric_args, rubric_reward_funcs
from wander.training.rollout_config import RolloutConfig


def multi_turn_error(env: Environment) -> ValueError:
    """Why RLOO cannot train a multi-turn env, and what to use instead."""
    return ValueError(
        f"{env.name} is multi-turn (max_turns={env.max_turns}), but RLOOTrainer generates one completion per prompt "
        "and scores it with reward functions: it has no rollout_func or environment_factory, so nothing would play "
        "the environment's later turns and the reward would judge a game after one move. Train it with GRPO, whose "
        "rollout_func plays whole episodes: env >> trainer_spec(GRPOTrainer, model=..., args=GRPOConfig(...))."
    )


def score_single_turn(env: Environment, completions: list, episode_spec: list[str], **_: Any) -> list[tuple]:
    """Play each completion as the one model turn of its episode and score it with the rubric."""
    episodes = []
    for completion, raw in zip(completions, episode_spec, strict=True):
        # Conversational prompts give a list holding the assistant message; plain prompts give text.
        text = completion if isinstance(completion, str) else (completion[-1].get("content") or "")
        episode = env.start(json.loads(raw))
        env.advance(episode, Reply(text))
        episodes.append(episode)
    env.score(episodes)
    return [(ep.reward, ep.values) for ep in episodes]


def rloo_trainer(
    env: Environment,
    trainer_cls: type,
    *,
    model: Any,
    args: Any = None,
    rollout: RolloutConfig | None = None,
    **kwargs: Any,
) -> Any:
    """An RLOOTrainer on a single-turn env: prompts from its specs, rewards from its rubric."""
    from trl import RLOOConfig

    if not env.is_single_turn:
        raise multi_turn_error(env)
    for reserved in ("reward_funcs", "train_dataset"):
        if kwargs.get(reserved) is not None:
            raise ValueError(f"{reserved} is built from the environment when composing {env.name} with RLOO")
    rollout = rollout or RolloutConfig()
    args = args if args is not None else RLOOConfig(output_dir=f"{env.name}-rloo")
    funcs, weights = rubric_reward_funcs(env, functools.partial(score_single_turn, env))
    args = rubric_args(args, weights)
    dataset = rollout_dataset(env, rollout, args)
    return trainer_cls(model=model, args=args, reward_funcs=funcs, train_dataset=dataset, **kwargs)
