"""Splits whose problems never share a prompt: a problem's text decides whether it may be trained on.

Seeds alone keep splits apart, but two seeds can draw the same problem (a family, its constants): with repeats,
an eval problem would be one the model saw solved in training, and the eval split would measure memory. So a
fixed share of the problem texts (by a hash of the text, whatever the seed) is held out: the eval and test
splits draw only those, the train split never does. Within a split no text repeats either, and the test split
takes none of the eval split's, so every figure rests on as many distinct problems as its split has episodes.
"""

from __future__ import annotations

import hashlib
import random
from typing import Protocol

from wander.core.splits import SPLIT_SEEDS

HELD_OUT_EVERY = 5  # one problem text in 5 is for the eval and test splits only
MAX_DRAWS = 100  # seeds drawn per spec kept before a split is found impossible


class GeneratedSplits(Protocol):
    seed: int
    num_groups: int
    sizes: dict[str, int]

    def make_spec(self, seed: int, stratum: int | None = None) -> dict: ...


def held_out(problem: str) -> bool:
    """Whether a problem text belongs to the held-out share (eval and test), never to train."""
    return int(hashlib.sha256(problem.encode()).hexdigest(), 16) % HELD_OUT_EVERY == 0


def disjoint_split_specs(env: GeneratedSplits, split: str) -> list[dict]:
    """The split's specs from its seed range, strata round-robin, each problem on its side of the held-out line,
    no text twice (the test split: none of the eval split's either)."""
    low, high = SPLIT_SEEDS[split]
    rng = random.Random(f"{env.seed}:{split}")
    wanted, seeds, specs = (
        split != "train",
        set(),
        [],
    )  # seeds stay unique too: synthesis keys episodes by them
    texts = {spec["problem"] for spec in disjoint_split_specs(env, "eval")} if split == "test" else set()
    for _ in range(env.sizes[split] * MAX_DRAWS):
        if len(specs) == env.sizes[split]:
            return specs
        seed = rng.randrange(low, high)
        spec = env.make_spec(seed, len(specs) % env.num_groups)
        if seed not in seeds and spec["problem"] not in texts and held_out(spec["problem"]) == wanted:
            seeds.add(seed)
            texts.add(spec["problem"])
            specs.append(spec)
    if len(specs) == env.sizes[split]:
        return specs
    raise ValueError(
        f"the {split} split found {len(specs)} of {env.sizes[split]} distinct problems on its side of the held-out "
        f"line in {env.sizes[split] * MAX_DRAWS} draws; lower its size or num_groups"
    )
