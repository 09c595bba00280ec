"""GRPO one decision at a time, for environments whose every turn reads a fresh observation (no history).

When a model turn sees only the current observation (tic-tac-toe with `history="current"`), a whole episode is not
one token sequence, so it cannot be one GRPO sample. Here a sample is one decision instead: each group of
`num_generations` samples shares an episode spec, plays a common prefix of `depth` model turns (depth drawn from the
spec's seed), then branches: every sample answers the same position once (the tokens that carry the loss), then
plays on to the end (no loss on those turns): with the trainer's sampling, or greedily (`play_on="greedy"`). Its
reward is the episode's rubric reward, so the group's spread is the value of the branch move under the current
policy, a cleaner credit assignment than one outcome spread over every move of a game. Played on greedily, that
value is the one evaluation measures, with no luck of later samples in it: measured, sampled play-on left every
group with spread (reward std ~0.45) mostly from moves after the branch. Episode logic is the environment's own
(`start`/`advance`/`observation`/`score`), the same code `env.evaluate` runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envs.environment import Environment
from envs.episode import Episode
from envs.policies.base import Message, Reply
from envs.training.chat_tokens import render_ids
from envs.training.episode_data import spec_of

# observations -> (prompt ids, completion ids, sampling logprobs or None, decoded replies), one per observation
TurnFn = Callable[
    [list[list[Message]]], tuple[list[list[int]], list[list[int]], list[list[float]] | None, list[str]]
]


def branch_depth(spec: dict, max_depth: int) -> int:
    """Model turns played before the branch: a pure function of the spec's seed (0 = the first move)."""
    return (int(spec.get("seed", 0)) * 2654435761 >> 7) % max_depth


def play_decisions(
    env: Environment,
    specs: list[dict],
    group_size: int,
    turn: TurnFn,
    max_depth: int = 4,
    play_on: TurnFn | None = None,
) -> list[dict]:
    """One decision sample per spec: groups share a prefix, then branch; later turns by `play_on` (else `turn`)."""
    if len(specs) % group_size:
        raise ValueError(f"{len(specs)} specs do not split into groups of {group_size}")
    groups = [specs[i] for i in range(0, len(specs), group_size)]
    prefixes = [env.start(spec) for spec in groups]
    depths = [branch_depth(spec, max_depth) for spec in groups]
    branch_points = [ep.fork() for ep in prefixes]  # the latest live position of each prefix
    for depth in range(max_depth):
        live = [i for i, ep in enumerate(prefixes) if not ep.done and depth < depths[i]]
        if not live:
            break
        _play_turn(env, [prefixes[i] for i in live], turn)
        for i in live:
            if not prefixes[i].done:
                branch_points[i] = prefixes[i].fork()
    episodes = [branch_points[i // group_size].fork() for i in range(len(specs))]
    prompt_ids, completion_ids, logprobs = _play_turn(env, episodes, turn)
    while live := [ep for ep in episodes if not ep.done]:
        _play_turn(env, live, play_on or turn)
    env.score(episodes)
    return [
        {
            "prompt_ids": prompt_ids[i],
            "completion_ids": completion_ids[i],
            "logprobs": logprobs[i] if logprobs is not None else None,
            "episode": episodes[i],
        }
        for i in range(len(specs))
    ]


def _play_turn(
    env: Environment, episodes: list[Episode], turn: TurnFn
) -> tuple[list[list[int]], list[list[int]], list[list[float]] | None]:
    prompts, completions, logprobs, texts = turn([env.observation(ep) for ep in episodes])
    for ep, text in zip(episodes, texts, strict=True):
        env.advance(ep, Reply(text))
    return prompts, completions, logprobs


class DecisionRollout:
    """TRL `rollout_func(prompts, trainer)`: one decision per sample, scored by the episode it leads to."""

    def __init__(self, env: Environment, max_depth: int = 4, play_on: str = "sample"):
        if max_depth < 1:
            raise ValueError(f"max_depth must be at least 1, got {max_depth}")
        if play_on not in ("sample", "greedy"):
            raise ValueError(f"play_on must be 'sample' or 'greedy', got {play_on!r}")
        self.env, self.max_depth, self.play_on = env, max_depth, play_on

    def __call__(self, prompts: list[list[Message]], trainer: Any) -> dict[str, list]:
        """One sample per prompt; TRL repeats each prompt num_generations times in a row."""
        if trainer.accelerator.num_processes != 1:
            raise NotImplementedError(
                "decision rollouts run in one process; use one process or history='full'"
            )
        tokenizer = trainer.processing_class
        template_kwargs = dict(trainer.chat_template_kwargs)
        if trainer.chat_template is not None:
            template_kwargs["chat_template"] = trainer.chat_template

        def turn(conversations: list[list[Message]]):
            ids = [render_ids(tokenizer, c, True, **template_kwargs) for c in conversations]
            completions, logprobs = trainer._generate_single_turn(ids, None, {}, num_generations=1)
            completions = [list(c) for c in completions]
            return (
                ids,
                completions,
                logprobs,
                [tokenizer.decode(c, skip_special_tokens=True) for c in completions],
            )

        samples = play_decisions(
            self.env,
            [spec_of(p) for p in prompts],
            trainer.num_generations,
            turn,
            self.max_depth,
            play_on=_greedy_turn(trainer, template_kwargs) if self.play_on == "greedy" else None,
        )
        episodes = [s["episode"] for s in samples]
        return {
            "prompt_ids": [s["prompt_ids"] for s in samples],
            "completion_ids": [s["completion_ids"] for s in samples],
            "logprobs": [s["logprobs"] for s in samples] if trainer.use_vllm else None,
            "env_mask": [[1] * len(s["completion_ids"]) for s in samples],
            "episode_reward": [ep.reward for ep in episodes],
            "episode_values": [ep.values for ep in episodes],
            "episode_error": [ep.error for ep in episodes],
        }


def _greedy_turn(trainer: Any, template_kwargs: dict) -> TurnFn:
    """Replies of the trainer's current model, greedy (texts only: turns after the branch carry no loss)."""
    from envs.policies.transformers_policy import TransformersPolicy

    model = trainer.accelerator.unwrap_model(trainer.model)
    policy = TransformersPolicy(
        model,
        trainer.processing_class,
        greedy=True,
        max_new_tokens=trainer.max_completion_length or 16,
        chat_template_kwargs=template_kwargs,
    )

    def turn(conversations: list[list[Message]]):
        return [], [], None, [reply.content for reply in policy(conversations)]

    return turn
