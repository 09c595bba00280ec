"""Trainer datasets of episode specs: one row per episode (group), each batch covering every stratum."""

from __future__ import annotations

import json
import random
from typing import Any

from datasets import Dataset

from wander.core.environment import Environment
from wander.core.policy import Message
from wander.core.sampling import stratified_order
from wander.training.rollout_config import RolloutConfig

# TRL hands a rollout_func only the prompts, so the spec rides inside the prompt's first message under
# this key (chat templates render role and content only); reward functions and environment factories
# read the column of the same name.
SPEC_KEY = "episode_spec"


def dump_spec(spec: dict) -> str:
    """A spec as canonical JSON: Arrow keeps one column type whatever the env's spec fields are."""
    return json.dumps(spec, sort_keys=True)


def spec_of(prompt: list[Message]) -> dict:
    """The episode spec carried by a prompt built by `episode_dataset(..., spec_in_prompt=True)`."""
    raw = prompt[0].get(SPEC_KEY) if prompt and isinstance(prompt[0], dict) else None
    if raw is None:
        raise ValueError(
            "this prompt carries no episode spec: the env rollout_func plays episodes of the dataset built by "
            "compose(env, ...) (wander.training.episode_data.episode_dataset); do not pass your own train_dataset"
        )
    return json.loads(raw)


def episode_prompt(env: Environment, spec: dict, spec_in_prompt: bool = False) -> list[Message]:
    """The env's opening messages of an episode, optionally carrying the spec for a rollout_func."""
    messages = [dict(m) for m in env.start(spec).prompt]
    if spec_in_prompt:
        for m in messages:
            m[SPEC_KEY] = None  # one Arrow struct type for every message
        messages[0][SPEC_KEY] = dump_spec(spec)
    return messages


def spec_order(
    env: Environment, split: str, num_rows: int | None, seed: int, stratified: bool = True
) -> list[dict]:
    """`num_rows` specs of a split in stratified order, a fresh seeded order for each pass over the split."""
    specs = env.get_dataset(split)
    if len(specs) == 0:
        raise ValueError(f"{env.name} split {split!r} is empty; nothing to train on")
    columns = specs.column_names if hasattr(specs, "column_names") else []
    strata = list(specs["stratum"]) if "stratum" in columns else [0] * len(specs)
    num_rows = len(specs) if num_rows is None else num_rows
    order: list[int] = []
    epoch = 0
    while len(order) < num_rows:
        if stratified:
            order += stratified_order(strata, seed + epoch)
        else:
            order += random.Random(seed + epoch).sample(range(len(specs)), len(specs))
        epoch += 1
    return [dict(specs[i]) for i in order[:num_rows]]


def episode_dataset(
    env: Environment,
    split: str = "train",
    *,
    num_rows: int | None = None,
    seed: int = 0,
    stratified: bool = True,
    spec_in_prompt: bool = False,
) -> Dataset:
    """A TRL prompt dataset: `prompt` (the env's opening messages) and `episode_spec` (JSON), in stratified order."""
    rows: list[dict[str, Any]] = []
    for spec in spec_order(env, split, num_rows, seed, stratified):
        rows.append({"prompt": episode_prompt(env, spec, spec_in_prompt), SPEC_KEY: dump_spec(spec)})
    return Dataset.from_list(rows)


def num_strata(env: Environment, split: str = "train") -> int:
    """Distinct difficulty strata of a split (1 when its specs have no `stratum`)."""
    specs = env.get_dataset(split)
    columns = specs.column_names if hasattr(specs, "column_names") else []
    return len(set(specs["stratum"])) if "stratum" in columns else 1


def rollout_dataset(env: Environment, rollout: RolloutConfig, args: Any, spec_in_prompt: bool = False) -> Any:
    """The trainer's dataset of episode specs, as the rollout config asks; refuses batches missing a stratum."""
    if rollout.stratified:
        check_strata(env, rollout.split, args)
    return episode_dataset(
        env,
        rollout.split,
        num_rows=rollout.num_rows or rows_needed(args),
        seed=args.seed if rollout.seed is None else rollout.seed,
        stratified=rollout.stratified,
        spec_in_prompt=spec_in_prompt,
    )


def rows_needed(args: Any) -> int | None:
    """Distinct prompts (episode groups) a run draws: enough for max_steps, or None for one pass."""
    if args.max_steps is None or args.max_steps <= 0:
        return None
    per_generation = args.generation_batch_size // args.num_generations  # global, all processes
    micro_batches = args.max_steps * args.gradient_accumulation_steps
    generations = -(-micro_batches // (args.steps_per_generation * args.num_iterations))
    return per_generation * generations


def check_strata(env: Environment, split: str, args: Any) -> None:
    """Refuse a generation batch that cannot hold every stratum equally often."""
    strata = num_strata(env, split)
    groups = args.generation_batch_size // args.num_generations
    if groups % strata:
        raise ValueError(
            f"each generation batch holds {groups} episode groups (generation_batch_size "
            f"{args.generation_batch_size} / num_generations {args.num_generations}), which does not divide by the "
            f"{strata} difficulty strata of {env.name}; choose sizes so every batch covers every stratum equally"
        )
