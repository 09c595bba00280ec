"""pass@k and avg@k: each item (episode spec) of the suite played k times, summarised per item, then over items.

An episode passes when its value of the suite's headline metric reaches the pass threshold (`passed`). For an item
played n times with c passes, pass@k' is Chen et al. (2021)'s unbiased estimator 1 - C(n-c, k') / C(n, k'): the
chance that at least one of k' samples drawn from its n passes. avg@n is the item's mean reward over its n samples.
Each figure is the mean over a cell's items, with a 95% interval over items (`stats.mean_ci`: Wilson when every
item's value is 0 or 1, else normal), so the interval counts distinct items, never samples of one item as if they
were independent. A cell's row keeps each figure's spread over items (`<name>_sd`) and its `items`, so cells pool
exactly as a mean's rows do (`cells.pooled_mean`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from wander.core.episode import Episode
from wander.core.evaluation_suite import MEAN, RATIO, EvaluationSuite, Metric
from wander.core.stats import mean_ci
from wander.eval.cells import pooled_mean, summary, within
from wander.eval.matrix_result import MatrixResult
from wander.eval.report_text import with_interval

ITEMS, SAMPLES = "items", "samples"  # the row columns: distinct items per cell, samples per item


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. (2021)'s unbiased pass@k of one item with `c` passes in `n` samples (k <= n)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n and 0 <= c <= n; got n={n}, c={c}")
    if n - c < k:  # every draw of k samples holds a pass
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def ladder(samples: int) -> tuple[int, ...]:
    """The k' the report shows pass@k' for: 1 and the samples played (1 alone for one sample)."""
    return tuple(sorted({1, samples}))


def sample_seed(seed: int, sample: int) -> int:
    """The policy seed of sample `sample`: sample 0 plays with the evaluation's `seed` itself (so one sample is
    the evaluation without samples), each other one with a seed derived from (seed, sample)."""
    return seed if sample == 0 else random.Random(f"{seed}:sample:{sample}").getrandbits(31)


def pass_rule(suite: EvaluationSuite, threshold: float | None) -> tuple[Metric, float]:
    """The headline metric and the threshold an episode's value of it must reach; null = its best value (1 for a
    rate or ratio, a bounded mean's best bound). ValueError naming the fix for an unbounded mean."""
    metric = suite.metric(suite.headline)
    if threshold is not None:
        return metric, threshold
    if metric.kind != MEAN:
        return metric, 0.0 if metric.lower_is_better else 1.0
    if metric.bounds is None:
        raise ValueError(
            f"pass@k: the headline metric {metric.name!r} is an unbounded mean, so it has no best value to pass "
            "at; set evaluate.pass_threshold (wander eval --pass-threshold) to the value an episode must reach"
        )
    return metric, metric.bounds[0] if metric.lower_is_better else metric.bounds[1]


def passed(episode: Episode, metric: Metric, threshold: float) -> bool:
    """Whether one episode passes: its headline value (a ratio's successes over its trials) reaches `threshold`."""
    value = metric.value(episode)
    if metric.kind == RATIO:
        trials = metric.trials(episode)
        value = value / trials if trials else -math.inf if not metric.lower_is_better else math.inf
    return value <= threshold if metric.lower_is_better else value >= threshold


def figure_names(samples: int) -> tuple[str, ...]:
    """The columns a sampled row adds: pass@k' for each k' of the ladder, then avg@samples."""
    return (*(f"pass@{k}" for k in ladder(samples)), f"avg@{samples}")


def figures(suite: EvaluationSuite, samples: int) -> tuple[Metric, ...]:
    """pass@k' and avg@k as metrics the tables show: pass@k' a share in [0, 1]; avg@k within the reward's bounds
    where the suite states them."""
    reward = next((m for m in suite.metrics if m.name == "reward"), None)
    *passes, avg = figure_names(samples)
    shares = tuple(Metric(name, label=name, bounds=(0.0, 1.0)) for name in passes)
    return (*shares, Metric(avg, label=avg, bounds=reward.bounds if reward else None))


def sample_columns(
    suite: EvaluationSuite, cell: Sequence[Episode], items: int, samples: int, rule: tuple[Metric, float]
) -> dict[str, float]:
    """The columns a cell's row gains from its `samples` x `items` episodes (sample-major, each sample's items in
    the suite's order): items, samples, and each figure with its 95% interval over items and its spread."""
    if len(cell) != items * samples:
        raise ValueError(f"a cell of {items} items x {samples} samples holds {len(cell)} episodes")
    per_item = [[cell[s * items + i] for s in range(samples)] for i in range(items)]
    metric, threshold = rule
    passes = [sum(passed(ep, metric, threshold) for ep in played) for played in per_item]
    values = {f"pass@{k}": [pass_at_k(samples, c, k) for c in passes] for k in ladder(samples)}
    values[f"avg@{samples}"] = [sum(ep.reward for ep in played) / samples for played in per_item]
    out: dict[str, float] = {ITEMS: items, SAMPLES: samples}
    for figure in figures(suite, samples):
        found = values[figure.name]
        stats = within(mean_ci(found), figure.bounds)
        mean = stats["mean"]
        spread = math.sqrt(sum((v - mean) ** 2 for v in found) / (items - 1)) if items > 1 else 0.0
        out.update(
            {
                figure.name: mean,
                f"{figure.name}_ci_low": stats["ci_low"],
                f"{figure.name}_ci_high": stats["ci_high"],
                f"{figure.name}_sd": spread,
            }
        )
    return out


def pooled_figures(rows: Sequence[dict], suite: EvaluationSuite) -> dict[str, float]:
    """Each figure pooled over sampled rows (a group of cells) with its 95% interval over all their items; {} for
    rows played once."""
    if not rows or SAMPLES not in rows[0]:
        return {}
    out: dict[str, float] = {ITEMS: sum(r[ITEMS] for r in rows)}
    for figure in figures(suite, rows[0][SAMPLES]):
        stats = within(pooled_mean(rows, figure.name, count=ITEMS), figure.bounds)
        out.update(
            {
                figure.name: stats["mean"],
                f"{figure.name}_ci_low": stats["ci_low"],
                f"{figure.name}_ci_high": stats["ci_high"],
            }
        )
    return out


def summary_and_figures(rows: Sequence[dict], suite: EvaluationSuite) -> dict[str, float]:
    """`cells.summary` of a group of cells, then its pass@k figures where the rows were sampled."""
    return {**summary(rows, suite), **pooled_figures(rows, suite)}


def headline_figures(result: MatrixResult, rows: Sequence[dict]) -> dict[str, float]:
    """The figures of a row pooled over `rows`, rounded as metrics.json keeps numbers; {} for one sample."""
    pooled = pooled_figures(rows, result.suite)
    return {name: round(pooled[name], 4) for name in figure_names(result.samples)} if pooled else {}


def table_cells(result: MatrixResult, row: dict) -> str:
    """The terminal table's figures of one row, each with its interval."""
    return "".join(f"{with_interval(row, m):>24}" for m in figures(result.suite, result.samples))


def table_head(result: MatrixResult) -> str:
    """The terminal table's header of the figures."""
    return "".join(f"{m.name + ' [95% CI]':>24}" for m in figures(result.suite, result.samples))


def markdown_lines(result: MatrixResult) -> list[str]:
    """The report's pass@k section: what the figures are, then per policy over every cell and per cell."""
    if result.samples == 1:
        return []
    metric, threshold = pass_rule(result.suite, result.pass_threshold)
    shown, layout = figures(result.suite, result.samples), result.suite.report
    k = result.samples
    cells = result.games * len(result.opponents) * len(result.sides)
    sign = "<=" if metric.lower_is_better else ">="
    md = [
        f"## pass@k over {k} samples",
        "",
        f"Each item was played {k} times (sample 0 with seed {result.seed}, each other sample with a seed derived "
        f"from it); the metrics above pool all {k} x {result.games} episodes of a cell. An episode passes when its "
        f"{metric.shown} is {sign} {threshold:g}. pass@k' is the unbiased estimator 1 - C(n-c, k')/C(n, k') per item "
        f"(n = {k} samples, c passes), avg@{k} the item's mean reward; each is the mean over items with a 95% "
        f"interval over items: {result.games} items per cell, {cells} per policy (docs/evaluation.md).",
        "",
        "| policy | items | " + " | ".join(m.name for m in shown) + " |",
        "|---|---:" + "|---" * len(shown) + "|",
    ]
    for name in result.policies:
        pooled = pooled_figures([r for r in result.rows if r["policy"] == name], result.suite)
        md.append(
            f"| {name} | {pooled[ITEMS]} | " + " | ".join(with_interval(pooled, m) for m in shown) + " |"
        )
    md += [
        "",
        f"| policy | {layout.group_label} | {layout.side_label} | "
        + " | ".join(m.name for m in shown)
        + " |",
    ]
    md.append("|---|---|---" + "|---" * len(shown) + "|")
    for r in result.rows:
        md.append(
            f"| {r['policy']} | {r['opponent']} | {r['side']} | "
            + " | ".join(with_interval(r, m) for m in shown)
            + " |"
        )
    return [*md, ""]
