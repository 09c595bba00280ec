"""Settings of preference pairs mined from groups of rollouts."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

PAIR_MODES = ("first_divergence", "episode")


@dataclass
class PreferenceConfig:
    r"""
    Configuration of the DPO dataset that `env >> trainer_spec(DPOTrainer, ...)` builds: a policy plays a group of
    episodes per spec (same spec, so the same opponent), and the best and worst episode of each group become a pair
    (chosen = higher reward, rejected = lower).

    Parameters:
        policy (policy, `str` or `None`, *optional*, defaults to `None`):
            Who plays. `None`: the model being trained, sampling at `temperature` (on-policy pairs); else any policy
            or a spec for `wander.policies.loading.make_policy`.
        num_prompts (`int`, *optional*, defaults to `256`):
            Episode specs to play, in stratified order (at most one pair each).
        group_size (`int`, *optional*, defaults to `4`):
            Episodes per spec.
        temperature (`float`, *optional*, defaults to `1.0`):
            Sampling temperature when the trained model plays.
        max_new_tokens (`int`, *optional*, defaults to `64`):
            Tokens per model turn when the trained model plays.
        min_reward_gap (`float`, *optional*, defaults to `0.0`):
            A group makes a pair only when best and worst rewards differ by more than this.
        pair (`str`, *optional*, defaults to `"first_divergence"`):
            `"first_divergence"`: the prompt is the conversation the two episodes share, up to the first model turn
            where they differ, and chosen/rejected are those two turns, so no environment token enters the DPO loss
            (a single-turn env gives the usual prompt/answer pairs). `"episode"`: the prompt is the episode's opening
            and chosen/rejected are the whole remaining conversations, environment turns included.
        split (`str`, *optional*, defaults to `"train"`):
            Split of episode specs.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the spec order and of the sampling.
        max_batch_size (`int` or `None`, *optional*, defaults to `None`):
            Conversations per policy call; `None` sends every live episode at once.
    """

    policy: Any = None
    num_prompts: int = 256
    group_size: int = 4
    temperature: float = 1.0
    max_new_tokens: int = 64
    min_reward_gap: float = 0.0
    pair: str = "first_divergence"
    split: str = "train"
    seed: int = 0
    max_batch_size: int | None = None

    def __post_init__(self) -> None:
        if self.group_size < 2:
            raise ValueError(f"group_size must be at least 2 to compare episodes, got {self.group_size}")
        if self.num_prompts < 1:
            raise ValueError(f"num_prompts must be at least 1, got {self.num_prompts}")
        if self.pair not in PAIR_MODES:
            raise ValueError(f"pair must be one of {PAIR_MODES}, got {self.pair!r}")
        if self.temperature <= 0:
            raise ValueError(
                f"temperature must be positive (pairs need different episodes), got {self.temperature}"
            )

    def to_dict(self) -> dict:
        """The config as a plain dict (a policy object by its class name)."""
        out = asdict(self)
        if self.policy is not None and not isinstance(self.policy, str):
            out["policy"] = type(self.policy).__name__
        return out
