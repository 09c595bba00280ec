"""Settings of the curate stage: teacher games filtered, deduplicated and balanced into the SFT dataset."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

OUTCOMES = ("win", "draw", "loss")


@dataclass
class CurateConfig:
    r"""
    Configuration for [`tasks.curate.run`]: the SFT dataset (one row per game: its `messages`) from the teacher's
    games, validated with Great Expectations before it replaces anything.

    Games are dropped in this order, each count reported: errored episodes, outcomes not in `allowed_outcomes`
    (losses), games with an invalid move, games with a malformed reply (format below `min_format`), games below a
    `min_values` rubric metric (moves the solver says lose value), repeats of an
    identical game (same messages), then the surplus of the larger difficulty strata when `balance` is on.

    Parameters:
        > Parameters that control filtering

        allowed_outcomes (`list[str]`, *optional*, defaults to `["win", "draw"]`):
            Outcomes kept; the rest (losses) are dropped.
        min_format (`float`, *optional*, defaults to `1.0`):
            Lowest share of well-formed replies (`<think>...</think><move>N</move>`) a kept game may have.
        min_values (`dict[str, float]`, *optional*, defaults to `{"move_optimality": 1.0}`):
            Lowest value of each named rubric metric (the env's own verifier: for tic-tac-toe the solver's share of
            value-keeping moves) a kept game may have; each metric is a filter of its own, counted in `dropped`.
        dedupe (`bool`, *optional*, defaults to `True`):
            Keep one game of each identical conversation (the first in spec order).
        balance (`bool`, *optional*, defaults to `True`):
            Downsample every difficulty stratum to the size of the smallest (seeded), so no opponent skill dominates.
        max_per_stratum (`int` or `None`, *optional*, defaults to `None`):
            Cap on games per stratum, applied after balancing; `None` for no cap.
        max_imbalance (`float`, *optional*, defaults to `0.1`):
            Validation: every stratum holds between (1 - x) and (1 + x) times the mean games per stratum.
        max_length (`int` or `None`, *optional*, defaults to `None`):
            Validation: longest game in tokens of the base model's tokenizer (chat template applied). `None` means
            the model's context length.

        > Parameters that control the split

        eval_fraction (`float`, *optional*, defaults to `0.05`):
            Share of games held out per stratum for the SFT eval loss (`eval.jsonl`); 0 writes no eval file.
        seed (`int`, *optional*, defaults to `0`):
            Seed of balancing and of the eval hold-out.

        > Parameters that control inputs and outputs

        env (`dict[str, Any]`, *optional*, defaults to the `env` section):
            The environment (its number of strata is checked).
        episodes_dir (`str`, *optional*, defaults to `layout.episodes`):
            Folder of the teacher's `episodes.jsonl`.
        model_dir (`str`, *optional*, defaults to `layout.base_model`):
            The base model, whose tokenizer measures lengths.
        output_dir (`str`, *optional*, defaults to `layout.sft`):
            Folder of `train.jsonl`, `eval.jsonl` and `validation.json` (replaced whole, atomically).
        metrics_dir (`str`, *optional*, defaults to `layout.metrics`):
            Folder of the stage's metrics file, `curate.json`.
    """

    allowed_outcomes: list[str] = field(
        default_factory=lambda: ["win", "draw"], metadata={"help": "Outcomes kept."}
    )
    min_format: float = field(default=1.0, metadata={"help": "Lowest share of well-formed replies kept."})
    min_values: dict[str, float] = field(
        default_factory=lambda: {"move_optimality": 1.0},
        metadata={"help": "Lowest value of each named rubric metric a kept game may have."},
    )
    dedupe: bool = field(default=True, metadata={"help": "Keep one game per identical conversation."})
    balance: bool = field(default=True, metadata={"help": "Downsample strata to the smallest."})
    max_per_stratum: int | None = field(default=None, metadata={"help": "Cap on games per stratum."})
    max_imbalance: float = field(
        default=0.1, metadata={"help": "Allowed relative deviation from the mean stratum."}
    )
    max_length: int | None = field(default=None, metadata={"help": "Longest game in tokens; None = context."})
    eval_fraction: float = field(default=0.05, metadata={"help": "Share of games held out for eval."})
    seed: int = field(default=0, metadata={"help": "Seed of balancing and the hold-out."})
    env: dict[str, Any] = field(
        default_factory=lambda: {"name": "tictactoe"},
        metadata={"help": "Environment name and settings.", "from": "env"},
    )
    episodes_dir: str = field(
        default="data/synth", metadata={"help": "Teacher games.", "from": "layout.episodes"}
    )
    model_dir: str = field(
        default="data/models/base", metadata={"help": "Base model (tokenizer).", "from": "layout.base_model"}
    )
    output_dir: str = field(
        default="data/sft", metadata={"help": "SFT dataset folder.", "from": "layout.sft"}
    )
    metrics_dir: str = field(
        default="data/metrics", metadata={"help": "Folder of curate.json.", "from": "layout.metrics"}
    )

    def __post_init__(self) -> None:
        bad = sorted(set(self.allowed_outcomes) - set(OUTCOMES))
        if bad or not self.allowed_outcomes:
            raise ValueError(
                f"allowed_outcomes must be a non-empty subset of {list(OUTCOMES)}, got {bad or '[]'}"
            )
        if not 0.0 <= self.min_format <= 1.0:
            raise ValueError(f"min_format must be within [0, 1], got {self.min_format}")
        if not 0.0 <= self.eval_fraction < 1.0:
            raise ValueError(f"eval_fraction must be within [0, 1), got {self.eval_fraction}")
        if self.max_imbalance < 0:
            raise ValueError(f"max_imbalance must be >= 0, got {self.max_imbalance}")
        for name in ("max_per_stratum", "max_length"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1 or null, got {value}")

    def to_dict(self) -> dict:
        """The config as a plain dict (for MLflow params)."""
        return asdict(self)
