"""Settings of SFT data made from an environment's trajectories."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class SFTDataConfig:
    r"""
    Configuration of the SFT dataset that `env >> trainer_spec(SFTTrainer, ...)` builds: a teacher plays episodes of
    the environment, filters drop the bad ones, and each kept episode becomes one row holding its whole conversation
    (trained with `assistant_only_loss`, so only the teacher's turns carry loss).

    Parameters:
        teacher (`str` or policy, *optional*, defaults to `"expert-0.5"`):
            Who plays: any policy object, or a spec for `wander.policies.loading.make_policy` (`"expert-0.5"` is the
            tic-tac-toe teacher's brain, a model folder, or an OpenAI-compatible URL).
        num_episodes (`int`, *optional*, defaults to `1000`):
            Episodes the teacher plays (before filtering).
        split (`str`, *optional*, defaults to `"train"`):
            Split of episode specs to play, in stratified order.
        filters (`tuple`, *optional*, defaults to `("no_error", "not_lost", "no_invalid_moves", "well_formatted")`):
            Predicates an episode must pass to be kept: names from `wander.training.sft_data.FILTERS` or any callables
            `(Episode) -> bool`.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the spec order and of a named teacher.
        max_batch_size (`int` or `None`, *optional*, defaults to `None`):
            Conversations per policy call; `None` sends every live episode at once.
    """

    teacher: Any = "expert-0.5"
    num_episodes: int = 1000
    split: str = "train"
    filters: tuple = ("no_error", "not_lost", "no_invalid_moves", "well_formatted")
    seed: int = 0
    max_batch_size: int | None = None

    def __post_init__(self) -> None:
        if self.num_episodes < 1:
            raise ValueError(f"num_episodes must be at least 1, got {self.num_episodes}")
        self.filters = tuple(self.filters)

    def to_dict(self) -> dict:
        """The config as a plain dict (callables and policies by name)."""
        out = asdict(self)
        out["filters"] = [f if isinstance(f, str) else getattr(f, "__name__", repr(f)) for f in self.filters]
        out["teacher"] = self.teacher if isinstance(self.teacher, str) else type(self.teacher).__name__
        return out
