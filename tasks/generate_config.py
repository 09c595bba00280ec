"""Settings of the generate stage: the episode-spec datasets of every split."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SPLITS = ("train", "eval", "test")


@dataclass
class GenerateConfig:
    r"""
    Configuration for [`tasks.generate.run`]: episode specs per split, stratified by opponent skill, validated with
    Great Expectations, written as `<split>.jsonl` under `output_dir`.

    An episode spec is a row `{seed, random_move_prob, stratum, model_starts}`: the episode seed fixes who starts
    and the opponent's replies; `random_move_prob` is the opponent's skill, drawn within its `stratum` (the env's
    `random_move_prob` range cut into `num_groups` equal bins, taken round-robin so every split is balanced).
    Seeds come from disjoint ranges per split, so the eval and test splits stay frozen when `num_train` grows.

    Parameters:
        num_train (`int`, *optional*, defaults to `4000`):
            Episodes in the train split (teacher games for SFT, prompts for GRPO).
        num_eval (`int`, *optional*, defaults to `200`):
            Episodes in the eval split.
        num_test (`int`, *optional*, defaults to `200`):
            Episodes in the test split.
        seed (`int`, *optional*, defaults to `0`):
            Split seed: decides every episode seed and opponent skill.
        env (`dict[str, Any]`, *optional*, defaults to the `env` section):
            The environment: `name` plus its settings (skill range, strata, rendering, turns). The split sizes and
            seed above are the env's too, but belong to this stage: the env section may not set them.
        output_dir (`str`, *optional*, defaults to `layout.datasets`):
            Folder of `train.jsonl`, `eval.jsonl`, `test.jsonl` and `validation.json` (replaced whole, atomically,
            and only after every split passed validation).
        metrics_dir (`str`, *optional*, defaults to `layout.metrics`):
            Folder of the stage's metrics file, `generate.json`.
    """

    num_train: int = field(default=4000, metadata={"help": "Episodes in the train split."})
    num_eval: int = field(default=200, metadata={"help": "Episodes in the eval split."})
    num_test: int = field(default=200, metadata={"help": "Episodes in the test split."})
    seed: int = field(default=0, metadata={"help": "Split seed."})
    env: dict[str, Any] = field(
        default_factory=lambda: {"name": "tictactoe"},
        metadata={"help": "Environment name and settings.", "from": "env"},
    )
    output_dir: str = field(
        default="data/datasets", metadata={"help": "Folder of the split files.", "from": "layout.datasets"}
    )
    metrics_dir: str = field(
        default="data/metrics", metadata={"help": "Folder of generate.json.", "from": "layout.metrics"}
    )

    def __post_init__(self) -> None:
        if min(self.num_train, self.num_eval, self.num_test) < 1:
            raise ValueError("num_train, num_eval and num_test must each be at least 1")
        if "name" not in self.env:
            raise ValueError("env needs a 'name' (e.g. tictactoe)")
        owned = sorted(set(self.env) & set(self.split_settings()))
        if owned:
            raise ValueError(f"env sets {owned}, which belong to the generate section; remove them from env")

    def split_settings(self) -> dict[str, int]:
        """The env settings this stage owns: split sizes and split seed."""
        return {
            "num_train": self.num_train,
            "num_eval": self.num_eval,
            "num_test": self.num_test,
            "seed": self.seed,
        }

    def sizes(self) -> dict[str, int]:
        """Rows per split."""
        return {"train": self.num_train, "eval": self.num_eval, "test": self.num_test}

    def to_dict(self) -> dict:
        """The config as a plain dict (for MLflow params)."""
        return asdict(self)
