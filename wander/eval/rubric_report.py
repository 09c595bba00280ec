"""Outputs of a rubric suite (an env whose `evaluation_suite` is "rubric"): rubric means per difficulty stratum
and split with 95% intervals, as headline metrics, the whole matrix (JSON and tidy CSV), two plots and a report.

The file names are the game matrix's (`wander.eval.report.OUTPUTS`): dvc.yaml declares the evaluate stage's outputs
once, for every env; the "heatmap" and "bars" files plot the env's headline metric.
"""

from __future__ import annotations

import json

from wander.eval.compare import compare, conclusion
from wander.eval.matrix import MatrixResult, pooled
from wander.eval.report import OUTPUTS, headline_policies


def metric_names(result: MatrixResult) -> list[str]:
    """The rubric metrics the rows carry (reward first), in row order."""
    return [k.removesuffix("_sd") for k in result.rows[0] if k.endswith("_sd")]


def plot_labels(result: MatrixResult) -> tuple[str, dict[str, str]]:
    """The metric the plots show (the env's headline) and what they say about it and the columns."""
    return result.headline, {
        "title": f"Mean {result.headline}",
        "axis": f"mean {result.headline}",
        "columns": "difficulty stratum; split",
        "interval": "95% interval",
        "bar_columns": "stratum",
        "pooled": "all splits",
    }


def pooled_metrics(rows: list[dict], names: list[str]) -> dict[str, float]:
    """Every metric pooled over rows, with its interval."""
    out: dict[str, float] = {"games": sum(r["games"] for r in rows)}
    for name in names:
        stats = pooled(rows, name)
        out.update(
            {name: stats["mean"], f"{name}_ci_low": stats["ci_low"], f"{name}_ci_high": stats["ci_high"]}
        )
    return out


def headline_metrics(result: MatrixResult, baseline: str | None = None) -> dict:
    """Per headline row (candidate and baseline): the headline metric overall and per split."""
    out = {}
    for name in headline_policies(result, baseline):
        rows = [r for r in result.rows if r["policy"] == name]
        head = {"all": round(pooled(rows, result.headline)["mean"], 4)}
        for side in result.sides:
            head[side] = round(pooled([r for r in rows if r["side"] == side], result.headline)["mean"], 4)
        out[name] = {result.headline: head}
    return out


def matrix_dict(result: MatrixResult, seed: int) -> dict:
    """policies.<row>.overall and policies.<row>.opponents.<stratum>.<split>, every metric with its interval."""
    names = metric_names(result)
    policies = {}
    for name in result.policies:
        rows = [r for r in result.rows if r["policy"] == name]
        groups = {
            g: {r["side"]: {k: v for k, v in r.items() if k != "policy"} for r in rows if r["opponent"] == g}
            for g in result.opponents
        }
        policies[name] = {"overall": pooled_metrics(rows, names), "opponents": groups}
    clean = json.loads(json.dumps(policies), parse_constant=lambda _: None)  # NaN -> null
    return {"games_per_cell": result.games, "seed": seed, "policies": clean}


def _ci(stats: dict, name: str) -> str:
    return f"{stats[name]:.3f} [{stats[name + '_ci_low']:.3f}, {stats[name + '_ci_high']:.3f}]"


def text_table(result: MatrixResult) -> str:
    """The suite as a fixed-width table for a terminal: the headline metric per cell."""
    metric = result.headline
    lines = [f"{result.games} episodes per cell; decoding: {result.decoding}"]
    lines.append(f"{'policy':<16}{'stratum':<14}{'split':<8}{metric + ' [95% CI]':>28}")
    for r in result.rows:
        lines.append(f"{r['policy'][:15]:<16}{r['opponent']:<14}{r['side']:<8}{_ci(r, metric):>28}")
    return "\n".join(lines)


def markdown_report(result: MatrixResult, seed: int, baseline: str | None = None) -> str:
    """The report: settings, plots, every metric per policy and cell, comparisons and sample episodes."""
    names, metrics = list(result.policies), metric_names(result)
    md = [
        "# Evaluation suite",
        "",
        f"Policies: {', '.join(f'`{n}`' for n in names)}. Columns: difficulty strata {', '.join(result.opponents)} "
        f"of the {' and '.join(result.sides)} splits, {result.games} episodes per cell (seed {seed}); decoding: "
        f"{result.decoding}. Intervals are 95% (normal approximation; Wilson for 0/1 metrics per cell).",
        "",
        f"![{result.headline} heatmap]({OUTPUTS['heatmap']})",
        "",
        f"![{result.headline} by policy]({OUTPUTS['bars']})",
        "",
        "## Summary per policy",
        "",
        "| policy | " + " | ".join(metrics) + " |",
        "|---" * (len(metrics) + 1) + "|",
    ]
    for n in names:
        stats = pooled_metrics([r for r in result.rows if r["policy"] == n], metrics)
        md.append(f"| {n} | " + " | ".join(_ci(stats, m) for m in metrics) + " |")
    md += ["", "## Every cell", ""]
    for n in names:
        md += [f"### {n}", "", "| stratum | split | " + " | ".join(metrics) + " |"]
        md.append("|---|---" + "|---" * len(metrics) + "|")
        for r in (r for r in result.rows if r["policy"] == n):
            md.append(f"| {r['opponent']} | {r['side']} | " + " | ".join(_ci(r, m) for m in metrics) + " |")
        md.append("")
    base = baseline or names[0]
    for n in (n for n in names if n != base):
        found = compare(*([r for r in result.rows if r["policy"] == p] for p in (base, n)), result.headline)
        md += [f"**{conclusion(found, base, n)}**", ""]
    if result.curves:
        md += ["## Learning curve", "", f"![learning curve]({OUTPUTS['curve']})", ""]
    md += ["## Sample episodes", ""]
    for n in names:
        episodes = result.episodes[n]
        best = max(episodes, key=lambda ep: ep.reward)
        worst = min(episodes, key=lambda ep: ep.reward)
        for kind, ep in (("the best", best), ("the worst", worst)):
            md += [
                f"### {n}: {kind} episode ({ep.spec.get('opponent')}, {ep.spec.get('side')}, seed {ep.seed}), "
                f"reward {ep.reward:.3f}",
                "",
                "```text",
                result.render(ep),
                "```",
                "",
            ]
    return "\n".join(md).rstrip() + "\n"
