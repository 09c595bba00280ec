"""Cells of the evaluation matrix: a tidy row per (policy, column group, side), and metrics pooled over rows.

What a row holds comes from the env's suite (`wander.core.evaluation_suite`): each metric's kind decides its
interval (Wilson from counts for rates and ratios, `mean_ci` for means) and which counts or spreads the row keeps,
so rows pool exactly, in memory or read back from the CSV.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from wander.core.episode import Episode
from wander.core.evaluation_suite import MEAN, RATE, RATIO, EvaluationSuite, Metric
from wander.core.stats import Z95, mean_ci, wilson_interval


def counts(rows: Sequence[dict], metric: Metric) -> tuple[int, int]:
    """Successes and trials of a rate or ratio, summed over rows (exact: rows keep their counts)."""
    games = sum(r["games"] for r in rows)
    if metric.kind == RATIO:
        return sum(r[metric.count] for r in rows), sum(r[metric.trials_count] for r in rows)
    if metric.kind != RATE:
        raise ValueError(f"{metric.name!r} is a mean, not a rate: it has no counts")
    if metric.failures:
        return games - sum(r[metric.failures] for r in rows), games
    return sum(r[metric.count] for r in rows), games


def pooled(rows: Sequence[dict], metric: Metric) -> dict[str, float]:
    """A metric pooled over rows (e.g. both sides, or a whole row of the matrix) with its 95% interval: a rate from
    its counts (Wilson), a mean from each row's mean, spread and games (normal); a mean without spreads is the
    game-weighted mean alone."""
    if metric.kind == MEAN:
        return within(pooled_mean(rows, metric.name, metric.spread), metric.bounds)
    successes, n = counts(rows, metric)
    low, high = wilson_interval(successes, n)
    if not n:
        return {"mean": float("nan"), "ci_low": low, "ci_high": high, "n": 0}
    return {"mean": successes / n, "ci_low": low, "ci_high": high, "n": n}


def pooled_mean(
    rows: Sequence[dict], name: str, spread: bool = True, count: str = "games"
) -> dict[str, float]:
    """A mean pooled over rows, its variance rebuilt from each row's mean, spread and size (`spread`: the rows
    keep `<name>_sd`; without, no interval; `count`: the row column of its size, e.g. `items` for pass@k)."""
    n = sum(r[count] for r in rows)
    if not n:
        return {"mean": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"), "n": 0}
    mean = sum(r[name] * r[count] for r in rows) / n
    if not spread:
        return {"mean": mean, "n": n}
    if all(_zeros_and_ones(r[name], r[f"{name}_sd"], r[count]) for r in rows):
        # As each cell's own interval (stats.mean_ci): a normal interval of 0 of 164 would be [0, 0].
        low, high = wilson_interval(round(mean * n), n)
        return {"mean": mean, "ci_low": low, "ci_high": high, "n": n}
    squares = sum((r[count] - 1) * r[f"{name}_sd"] ** 2 + r[count] * (r[name] - mean) ** 2 for r in rows)
    half = Z95 * math.sqrt(squares / (n - 1) / n) if n > 1 else 0.0
    return {"mean": mean, "ci_low": mean - half, "ci_high": mean + half, "n": n}


def _zeros_and_ones(mean: float, sd: float, games: int) -> bool:
    """Whether a row's values can only have been 0s and 1s: a whole number of ones, and the spread such values
    have (a row keeps its mean and spread, not its values)."""
    ones = mean * games
    if games < 1 or not 0.0 <= mean <= 1.0 or abs(ones - round(ones)) > 1e-6:
        return False
    binary_sd = math.sqrt(games / (games - 1) * mean * (1 - mean)) if games > 1 else 0.0
    return abs(sd - binary_sd) < 1e-6


def within(stats: dict[str, float], bounds: tuple[float, float] | None) -> dict[str, float]:
    """`stats` with its interval clipped to `bounds` (a normal interval of a share near 1 reaches past 1)."""
    if bounds is None or "ci_low" not in stats:
        return stats
    low, high = bounds
    return {**stats, "ci_low": max(low, stats["ci_low"]), "ci_high": min(high, stats["ci_high"])}


def summary(rows: Sequence[dict], suite: EvaluationSuite) -> dict[str, float]:
    """Flat metrics of a group of cells: games, then every metric pooled, with its interval where it has one."""
    out: dict[str, float] = {"games": sum(r["games"] for r in rows)}
    for metric in suite.metrics:
        stats = pooled(rows, metric)
        out[metric.name] = stats["mean"]
        if "ci_low" in stats:
            out[f"{metric.name}_ci_low"] = stats["ci_low"]
            out[f"{metric.name}_ci_high"] = stats["ci_high"]
    return out


def cell_row(
    suite: EvaluationSuite, policy: str, group: str, side: str, decoding: str, episodes: Sequence[Episode]
) -> dict:
    """One tidy row: the cell, the suite's spec columns, games, the counts its rates keep, errors, then every
    metric with its 95% interval (and a mean's spread when it keeps one)."""
    row = {"policy": policy, "opponent": group, "side": side}
    row.update((column, episodes[0].spec[key]) for column, key in suite.spec_columns)
    row.update(decoding=decoding, games=len(episodes))
    for metric in suite.metrics:
        if metric.kind == RATIO:
            row[metric.trials_count] = _count(metric, [metric.trials(ep) for ep in episodes])
        if metric.count:
            row[metric.count] = _count(metric, [metric.value(ep) for ep in episodes])
    row["errored"] = sum(ep.error is not None for ep in episodes)
    for metric in suite.metrics:
        if metric.kind != MEAN:
            stats = pooled([row], metric)
            row.update({metric.name: stats["mean"], **_interval(metric.name, stats)})
            continue
        values = [metric.value(ep) for ep in episodes]
        stats = within(mean_ci(values), metric.bounds)
        row.update({metric.name: stats["mean"], **_interval(metric.name, stats)})
        if metric.spread:
            row[f"{metric.name}_sd"] = (
                math.sqrt(sum((v - stats["mean"]) ** 2 for v in values) / (len(values) - 1))
                if len(values) > 1
                else 0.0
            )
    return row


def _interval(name: str, stats: dict[str, float]) -> dict[str, float]:
    return {f"{name}_ci_low": stats["ci_low"], f"{name}_ci_high": stats["ci_high"]}


def _count(metric: Metric, values: list[float]) -> int:
    total = sum(values)
    if total != int(total):
        raise ValueError(
            f"metric {metric.name!r} counts whole episodes or moves, but its values sum to {total}"
        )
    return int(total)
