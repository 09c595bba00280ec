"""Preference pairs from groups of rollouts (chosen = higher reward, rejected = lower) for TRL's DPOTrainer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from datasets import Dataset

from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.core.policy import Message, Policy
from wander.training.episode_data import spec_order
from wander.training.preferences_config import PreferenceConfig


def rollout_groups(
    env: Environment,
    policy: Policy,
    specs: Sequence[dict],
    group_size: int,
    max_batch_size: int | None = None,
) -> list[list[Episode]]:
    """`group_size` episodes per spec, all played in one batched rollout, grouped by spec."""
    episodes = env.rollout(
        policy, [s for s in specs for _ in range(group_size)], max_batch_size=max_batch_size
    )
    return [episodes[i : i + group_size] for i in range(0, len(episodes), group_size)]


def first_divergence(a: Episode, b: Episode) -> int | None:
    """Index of the first message where two episodes differ, when both are model turns there."""
    for k in range(min(len(a.messages), len(b.messages))):
        if a.messages[k] != b.messages[k]:
            both_model = a.messages[k].get("role") == b.messages[k].get("role") == "assistant"
            return k if both_model else None
    return None


def preference_pair(
    chosen: Episode, rejected: Episode, mode: str = "first_divergence"
) -> dict[str, list[Message]] | None:
    """A DPO row from two episodes of one spec, or None when they share no prompt to compare on."""
    if mode == "episode":
        if chosen.prompt != rejected.prompt:
            return None
        return {"prompt": chosen.prompt, "chosen": chosen.completion, "rejected": rejected.completion}
    k = first_divergence(chosen, rejected)
    if k is None:
        return None
    return {"prompt": chosen.messages[:k], "chosen": [chosen.messages[k]], "rejected": [rejected.messages[k]]}


def preference_pairs(
    groups: Sequence[Sequence[Episode]], min_reward_gap: float = 0.0, mode: str = "first_divergence"
) -> list[dict[str, list[Message]]]:
    """One pair per group whose best and worst episodes differ in reward by more than `min_reward_gap`."""
    pairs = []
    for group in groups:
        # max/min keep the first of tied episodes: the pairs are a pure function of the play order.
        best = max(group, key=lambda ep: ep.reward)
        worst = min(group, key=lambda ep: ep.reward)
        if best.reward - worst.reward <= min_reward_gap:
            continue
        pair = preference_pair(best, worst, mode)
        if pair is not None:
            pairs.append(pair)
    return pairs


def preference_dataset(env: Environment, policy: Policy, config: PreferenceConfig | None = None) -> Dataset:
    """DPO rows (conversational prompt/chosen/rejected) mined from the policy's rollouts of the env."""
    config = config or PreferenceConfig()
    specs = spec_order(env, config.split, config.num_prompts, config.seed)
    groups = rollout_groups(env, policy, specs, config.group_size, config.max_batch_size)
    pairs = preference_pairs(groups, config.min_reward_gap, config.pair)
    if not pairs:
        raise ValueError(
            f"no preference pair in {len(groups)} groups: every group's episodes tied in reward (or shared no "
            "prompt); sample more diverse episodes (higher temperature, bigger groups) or use another policy"
        )
    return Dataset.from_list(pairs)


def dpo_trainer(
    env: Environment,
    trainer_cls: type,
    *,
    model: Any,
    args: Any = None,
    preferences: PreferenceConfig | None = None,
    processing_class: Any = None,
    **kwargs: Any,
) -> Any:
    """A DPOTrainer on pairs mined from rollouts of `env` (by default the model's own, sampled)."""
    from trl import DPOConfig

    from wander.policies.scratch_model import load_model, load_tokenizer
    from wander.policies.transformers_policy import TransformersPolicy

    if kwargs.get("train_dataset") is not None:
        raise ValueError(
            "train_dataset is built from the environment; configure it with preferences=PreferenceConfig()"
        )
    config = preferences or PreferenceConfig()
    args = args if args is not None else DPOConfig(output_dir=f"{env.name}-dpo")
    if isinstance(model, str):
        processing_class = processing_class or load_tokenizer(model)
        model = load_model(model, device="cpu" if args.use_cpu else None)
    if processing_class is None:
        processing_class = load_tokenizer(model.config._name_or_path)
    policy = config.policy
    if policy is None:
        policy = TransformersPolicy(
            model,
            processing_class,
            temperature=config.temperature,
            max_new_tokens=config.max_new_tokens,
            seed=config.seed,
            max_batch_size=config.max_batch_size,
        )
    elif isinstance(policy, str):
        from wander.policies.loading import make_policy

        policy = make_policy(policy, seed=config.seed, temperature=config.temperature, env=env)
    dataset = preference_dataset(env, policy, config)
    return trainer_cls(
        model=model, args=args, train_dataset=dataset, processing_class=processing_class, **kwargs
    )
