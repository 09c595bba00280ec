"""Is B better than A? Per column of the matrix, decided by the 95% intervals, never by raw means.

B is better in a column when its interval lies wholly above A's (wholly below for a metric the env's suite marks
lower-is-better, such as losses or side effects), worse in the mirror case, and otherwise there is no clear
difference. Non-overlapping 95% intervals are a conservative test: a "better" is a difference the games really
show; "no clear difference" says more games are needed to tell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from wander.core.evaluation_suite import MEAN, Metric
from wander.eval.cells import pooled

BETTER, WORSE, UNCLEAR = "better", "worse", "no clear difference"


def verdict(a: dict[str, float], b: dict[str, float], lower_is_better: bool = False) -> str:
    """`better`, `worse` or `no clear difference` for B against A, from their intervals."""
    above = b["ci_low"] > a["ci_high"]
    below = b["ci_high"] < a["ci_low"]
    if lower_is_better:
        above, below = below, above
    return BETTER if above else WORSE if below else UNCLEAR


def compare(rows_a: Sequence[dict], rows_b: Sequence[dict], metric: Metric) -> list[dict]:
    """One entry per column (opponent x side) of A, then the pooled `all` column: both values and the verdict.

    `metric` is one of the suite's (`suite.comparable(name)`): its kind says how cells pool, its direction which
    way is better.
    """
    if not rows_a or not rows_b:
        raise ValueError("compare needs the matrix rows of both policies; one of them has none")
    if not metric.comparable:
        raise ValueError(f"cannot compare on {metric.name!r}: its pooled cells have no interval")
    needed = (f"{metric.name}_sd",) if metric.kind == MEAN else (metric.count or metric.failures,)
    needed += (metric.trials_count,) if metric.trials_count else ()
    absent = [k for k in needed if k not in rows_a[0] or k not in rows_b[0]]
    if absent:
        raise ValueError(
            f"the rows have no {', '.join(absent)} to compare {metric.name!r} with; compare rows of the suite "
            "that defines the metric"
        )
    b_cells = {(r["opponent"], r["side"]): r for r in rows_b}
    missing = [f"{r['opponent']} ({r['side']})" for r in rows_a if (r["opponent"], r["side"]) not in b_cells]
    if missing:
        raise ValueError(f"B was not evaluated on {', '.join(missing)}; evaluate both on the same opponents")
    columns = [((r["opponent"], r["side"]), [r], [b_cells[r["opponent"], r["side"]]]) for r in rows_a]
    columns.append((("all", "both"), list(rows_a), [b_cells[r["opponent"], r["side"]] for r in rows_a]))
    out = []
    for (opponent, side), a_rows, b_rows in columns:
        a, b = pooled(a_rows, metric), pooled(b_rows, metric)
        out.append(
            {
                "opponent": opponent,
                "side": side,
                "metric": metric.name,
                "a": a["mean"],
                "a_ci_low": a["ci_low"],
                "a_ci_high": a["ci_high"],
                "b": b["mean"],
                "b_ci_low": b["ci_low"],
                "b_ci_high": b["ci_high"],
                "verdict": verdict(a, b, metric.lower_is_better),
            }
        )
    return out


def compare_exact(
    exact_a: Mapping[str, Mapping[str, float]], exact_b: Mapping[str, Mapping[str, float]], metric: Metric
) -> list[dict] | None:
    """`compare`'s entries from two greedy policies' exact results (`ExactEvaluation.exact_suite`: per column
    group, both sides pooled), then `all` (their mean): an exact value has no sampling noise, so any difference is
    a verdict. None when either lacks `metric` in a group of A's."""
    groups = list(exact_a)
    if not groups or any(
        metric.name not in exact_a[g] or metric.name not in exact_b.get(g, {}) for g in groups
    ):
        return None
    # Rounded: the same policy's sums may differ in the last bits when computed in another order.
    pairs = [(g, round(exact_a[g][metric.name], 9), round(exact_b[g][metric.name], 9)) for g in groups]
    pairs.append(("all", sum(a for _, a, _ in pairs) / len(pairs), sum(b for _, _, b in pairs) / len(pairs)))
    return [
        {
            "opponent": group,
            "side": "both",
            "metric": metric.name,
            "a": a,
            "a_ci_low": a,
            "a_ci_high": a,
            "b": b,
            "b_ci_low": b,
            "b_ci_high": b,
            "verdict": verdict(
                {"ci_low": a, "ci_high": a}, {"ci_low": b, "ci_high": b}, metric.lower_is_better
            ),
        }
        for group, a, b in pairs
    ]


def is_better(comparisons: Sequence[dict]) -> bool:
    """B beats A: clearly better in at least one column and clearly worse in none."""
    verdicts = [c["verdict"] for c in comparisons]
    return BETTER in verdicts and WORSE not in verdicts


def conclusion(comparisons: Sequence[dict], a: str = "A", b: str = "B", exact: bool = False) -> str:
    """One sentence summing up the per-column verdicts (`exact`: of exact results, where no games can tell more)."""
    columns = [c for c in comparisons if c["opponent"] != "all"]
    better = sum(c["verdict"] == BETTER for c in columns)
    worse = sum(c["verdict"] == WORSE for c in columns)
    n, metric = len(columns), comparisons[0]["metric"] if comparisons else "the metric"
    if better and not worse:
        return f"{b} is better than {a} on {metric}: better in {better} of {n} columns, worse in none."
    if worse and not better:
        return f"{b} is worse than {a} on {metric}: worse in {worse} of {n} columns, better in none."
    if better and worse:
        return f"mixed: {b} is better than {a} in {better} of {n} columns and worse in {worse}."
    pooled_verdict = comparisons[-1]["verdict"] if comparisons else UNCLEAR
    if pooled_verdict != UNCLEAR:
        return (
            f"no single column differs clearly, but pooled over all columns {b} is {pooled_verdict} than {a}."
        )
    if exact:
        return f"{b} and {a} are equal on {metric} in every column (exact results)."
    return f"no clear difference between {a} and {b} on {metric} in any column; play more games to tell."
