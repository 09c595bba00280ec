"""Paired comparisons: two policies played on the same frozen items, compared item by item.

Where `wander.eval.compare` asks whether two intervals are apart, a paired comparison takes each item's difference
(B's value minus A's on the same spec) and puts a 95% interval on their mean by a paired bootstrap: the items are
resampled, each keeping both its values, so what the two policies share (an item both find easy) cancels. It
tells a smaller difference apart than two separate intervals can, on the same episodes.

    paired_difference([0, 0, 1, 1], [1, 0, 1, 1])  # {"mean": 0.25, "ci_low": 0.0, "ci_high": 0.75, "n": 4, ...}
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from wander.core.episode import Episode
from wander.eval.matrix_result import MatrixResult

RESAMPLES = (
    2000  # bootstrap resamples: the interval's ends move by well under 0.01 between seeds at this count
)
SEED = 0  # the resampling's seed: the same episodes give the same interval


def paired_difference(
    a: Sequence[float], b: Sequence[float], resamples: int = RESAMPLES, seed: int = SEED
) -> dict[str, float]:
    """Mean of b[i] - a[i] with its 95% paired-bootstrap interval (percentiles), the count, and how many items
    went each way."""
    if len(a) != len(b) or not a:
        raise ValueError(f"a paired comparison needs the same items on both sides; got {len(a)} and {len(b)}")
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    n = len(diffs)
    rng = random.Random(seed)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    low, high = means[int(0.025 * (resamples - 1))], means[int(round(0.975 * (resamples - 1)))]
    return {
        "mean": sum(diffs) / n,
        "ci_low": low,
        "ci_high": high,
        "n": n,
        "better": sum(d > 0 for d in diffs),
        "worse": sum(d < 0 for d in diffs),
    }


def paired_episodes(a: Sequence[Episode], b: Sequence[Episode], metric: str) -> dict[str, float]:
    """`paired_difference` of `metric` (the reward or a rubric value) over two policies' episodes of the same specs,
    in the same order (the evaluation's frozen cells); refused when the specs differ."""
    if len(a) != len(b) or any(x.seed != y.seed or x.spec != y.spec for x, y in zip(a, b, strict=False)):
        raise ValueError(
            "the two policies did not play the same specs in the same order: no paired comparison"
        )

    def value(ep: Episode) -> float:
        return ep.reward if metric == "reward" else float(ep.values.get(metric, 0.0))

    return paired_difference([value(x) for x in a], [value(y) for y in b])


def paired_results(result: MatrixResult) -> list[tuple[str, str, dict[str, float]]]:
    """The headline metric's paired differences of a played matrix, (a, b, b minus a): each row against the row
    before it and against the first (the lineage's start: base, then SFT, then the trained stages)."""
    names = list(result.policies)
    pairs = [(names[i - 1], names[i]) for i in range(1, len(names))]
    pairs += [(names[0], names[i]) for i in range(2, len(names))]
    return [
        (a, b, paired_episodes(result.episodes[a], result.episodes[b], result.headline)) for a, b in pairs
    ]


def verdict(found: dict[str, float]) -> str:
    """What a paired interval says: better or worse when it lies wholly above or below 0."""
    return "better" if found["ci_low"] > 0 else "worse" if found["ci_high"] < 0 else "no clear difference"


def paired_line(a_name: str, b_name: str, found: dict[str, float], metric: str) -> str:
    """One line for a report: the difference, its interval, the items each way, and what the interval says."""
    low, high = found["ci_low"], found["ci_high"]
    return (
        f"| {b_name} - {a_name} | {metric} | {found['mean']:+.3f} [{low:+.3f}, {high:+.3f}] | {found['n']} | "
        f"{found['better']} / {found['worse']} | {verdict(found)} |"
    )
