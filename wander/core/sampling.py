"""Stratified ordering: every batch covers every difficulty stratum, whatever the dataset order."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence


def stratified_order(strata: Sequence[int], seed: int) -> list[int]:
    """Indices interleaved round-robin across strata (shuffled within each, seeded).

    Any window of `num_strata` consecutive indices holds one episode of each stratum while
    all strata last, so a batch whose size is a multiple of the number of strata is balanced.
    """
    rng = random.Random(seed)
    groups: dict[int, list[int]] = {}
    for i, s in enumerate(strata):
        groups.setdefault(s, []).append(i)
    pools = [groups[s] for s in sorted(groups)]
    for pool in pools:
        rng.shuffle(pool)
    order = []
    for rank in range(max((len(p) for p in pools), default=0)):
        row = [p[rank] for p in pools if rank < len(p)]
        rng.shuffle(row)
        order.extend(row)
    return order


class StratifiedSampler:
    """An epoch-aware index sampler (usable as a torch Sampler) built on `stratified_order`."""

    def __init__(self, strata: Sequence[int], seed: int = 0):
        self.strata = list(strata)
        self.seed = seed
        self.epoch = 0

    def __iter__(self) -> Iterator[int]:
        order = stratified_order(self.strata, self.seed + self.epoch)
        self.epoch += 1
        return iter(order)

    def __len__(self) -> int:
        return len(self.strata)
