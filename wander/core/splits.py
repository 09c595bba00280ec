"""Train/eval/test splits of episode specs made from seeds: what every env that generates its own data shares.

An env mixes in `SeededSplits` (before its `Environment` base) and writes `spec_fields(seed, stratum)`: the
episode's data drawn from the seed alone. Splits come from disjoint seed ranges, strata round-robin, or from
the generate stage's files when `specs_dir` is set (GRPO replays the generated specs).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from wander.core.pipeline_hooks import SpecChecks

# Disjoint seed ranges keep splits apart whatever their sizes (as in tic-tac-toe).
SPLIT_SEEDS = {"train": (0, 10**9), "eval": (10**9, 2 * 10**9), "test": (2 * 10**9, 3 * 10**9)}


class SeededSplits:
    """Splits of specs `{"seed", "stratum", **spec_fields(seed, stratum)}`, built on first use."""

    name: str

    def init_splits(
        self, num_train: int, num_eval: int, num_test: int, seed: int, num_groups: int, specs_dir: str | None
    ) -> None:
        """Record the split sizes, split seed, strata and where generated specs live (call in `__init__`)."""
        if min(num_train, num_eval, num_test) < 0 or num_groups < 1:
            raise ValueError("split sizes must not be negative and num_groups must be at least 1")
        self.sizes = {"train": num_train, "eval": num_eval, "test": num_test}
        self.seed, self.num_groups, self.specs_dir = seed, num_groups, specs_dir
        self._splits: dict[str, Any] = {}

    def spec_fields(self, seed: int, stratum: int) -> dict:
        """The episode's data for a seed in a stratum (override)."""
        raise NotImplementedError

    def make_spec(self, seed: int, stratum: int | None = None) -> dict:
        """The spec of a seed: its stratum (from the seed unless given) and its data."""
        stratum = random.Random(seed).randrange(self.num_groups) if stratum is None else stratum
        return {"seed": seed, "stratum": stratum, **self.spec_fields(seed, stratum)}

    def split_specs(self, split: str) -> list[dict]:
        """Unique seeds from the split seed (or the generate stage's `specs_dir`), strata round-robin."""
        if self.specs_dir is not None:
            path = Path(self.specs_dir) / f"{split}.jsonl"
            rows = [
                json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
            ]
            return [self.make_spec(int(r["seed"]), int(r["stratum"])) for r in rows]
        low, high = SPLIT_SEEDS[split]
        seeds = random.Random(f"{self.seed}:{split}").sample(range(low, high), self.sizes[split])
        return [self.make_spec(s, i % self.num_groups) for i, s in enumerate(seeds)]

    def get_dataset(self, split: str = "train"):
        """A `datasets.Dataset` of specs, built on first use."""
        if split not in SPLIT_SEEDS:
            raise KeyError(f"{self.name} has no split {split!r}; available: {sorted(SPLIT_SEEDS)}")
        if split not in self._splits:
            from datasets import Dataset  # lazy: playing an episode needs no datasets

            self._splits[split] = Dataset.from_list(self.split_specs(split))
        return self._splits[split]

    @property
    def dataset(self) -> dict:
        """All three splits."""
        return {s: self.get_dataset(s) for s in SPLIT_SEEDS}

    @dataset.setter
    def dataset(self, value: object) -> None:
        pass  # splits come from the settings, never assigned

    def spec_checks(self) -> SpecChecks:
        """The spec's columns (those of any seed's spec) and the strata."""
        return SpecChecks(columns=tuple(self.make_spec(0, 0)), strata=self.num_groups)
