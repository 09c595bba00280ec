"""Outputs of a rubric suite (an env whose `evaluation_suite().kind` is "rubric"): the suite's metrics (by default
the rubric's means) per difficulty stratum and split with 95% intervals, as headline metrics, the whole matrix
(JSON and tidy CSV), a terminal table and a report.

The file names are every kind's (`wander.eval.outputs.OUTPUTS`): dvc.yaml declares the evaluate stage's outputs
once, for every env; the "heatmap" and "bars" files plot the env's headline metric.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from wander.core.environment import Environment
from wander.eval.cells import pooled, summary
from wander.eval.compare import compare, conclusion
from wander.eval.matrix_result import MatrixResult
from wander.eval.outputs import OUTPUTS, read_matrix
from wander.eval.paired import RESAMPLES, SEED, paired_line, paired_results, verdict
from wander.eval.pass_at_k import (
    figure_names,
    markdown_lines,
    pooled_figures,
    summary_and_figures,
    table_cells,
    table_head,
)
from wander.eval.report_text import (
    headline_policies,
    intro,
    per_cell_words,
    shown_value,
    stage_lines,
    summary_rows,
    with_interval,
)


def headline_metrics(result: MatrixResult) -> dict:
    """Per headline row (candidate and baseline): the headline metric overall and per split, and so each pass@k
    figure where the items were sampled."""
    out = {}
    for name in headline_policies(result):
        rows = [r for r in result.rows if r["policy"] == name]
        headline = result.suite.metric(result.headline)
        head = {"all": round(pooled(rows, headline)["mean"], 4)}
        for side in result.sides:
            head[side] = round(pooled([r for r in rows if r["side"] == side], headline)["mean"], 4)
        out[name] = {result.headline: head}
        if result.samples > 1:
            for figure in figure_names(result.samples):
                out[name][figure] = {"all": round(pooled_figures(rows, result.suite)[figure], 4)}
                for side in result.sides:
                    cells = [r for r in rows if r["side"] == side]
                    out[name][figure][side] = round(pooled_figures(cells, result.suite)[figure], 4)
    return out


def matrix_dict(result: MatrixResult) -> dict:
    """policies.<row>.overall and policies.<row>.opponents.<stratum>.<split>, every metric with its interval."""
    policies = {}
    for name in result.policies:
        rows = [r for r in result.rows if r["policy"] == name]
        groups = {
            g: {r["side"]: {k: v for k, v in r.items() if k != "policy"} for r in rows if r["opponent"] == g}
            for g in result.opponents
        }
        policies[name] = {"overall": summary_and_figures(rows, result.suite), "opponents": groups}
    clean = json.loads(json.dumps(policies), parse_constant=lambda _: None)  # NaN -> null
    out = {"games_per_cell": result.games, "seed": result.seed}
    if result.samples > 1:  # absent for one sample: that matrix.json is the one before samples existed
        out.update(samples=result.samples, pass_threshold=result.pass_threshold)
    return {
        **out,
        "policies": clean,
        "paired": {f"{b} - {a}": found for a, b, found in paired_results(result)},
    }


def text_table(result: MatrixResult) -> str:
    """The suite as a fixed-width table for a terminal: the headline metric per cell."""
    metric, layout = result.suite.metric(result.headline), result.suite.report
    sampled = result.samples > 1
    lines = [f"{per_cell_words(result, 'episodes')}; decoding: {result.decoding}"]
    lines.append(
        f"{'policy':<16}{layout.group_label:<14}{layout.side_label:<8}{metric.shown + ' [95% CI]':>28}"
        + (table_head(result) if sampled else "")
    )
    for r in result.rows:
        lines.append(
            f"{r['policy'][:15]:<16}{r['opponent']:<14}{r['side']:<8}{with_interval(r, metric):>28}"
            + (table_cells(result, r) if sampled else "")
        )
    return "\n".join(lines)


def markdown_report(result: MatrixResult) -> str:
    """The report: settings, plots, every metric per policy and cell, comparisons and sample episodes."""
    suite, layout = result.suite, result.suite.report
    names, metrics, headline = list(result.policies), suite.columns("summary"), suite.metric(suite.headline)
    md = [
        f"# {layout.title}",
        "",
        intro(result),
        "",
        f"![{headline.shown} heatmap]({OUTPUTS['heatmap']})",
        "",
        f"![{headline.shown} by policy]({OUTPUTS['bars']})",
        "",
        "## Summary per policy",
        "",
        "| policy | " + " | ".join(m.shown for m in metrics) + " |",
        "|---" * (len(metrics) + 1) + "|",
    ]
    for n in names:
        stats = summary([r for r in result.rows if r["policy"] == n], suite)
        md.append(f"| {n} | " + " | ".join(shown_value(stats, m) for m in metrics) + " |")
    md += ["", *markdown_lines(result), "## Every cell", ""]
    metrics = suite.columns("cells")
    for n in names:
        md += [
            f"### {n}",
            "",
            f"| {layout.group_label} | {layout.side_label} | " + " | ".join(m.shown for m in metrics) + " |",
        ]
        md.append("|---|---" + "|---" * len(metrics) + "|")
        for r in (r for r in result.rows if r["policy"] == n):
            md.append(
                f"| {r['opponent']} | {r['side']} | " + " | ".join(shown_value(r, m) for m in metrics) + " |"
            )
        md.append("")
    base = result.baseline
    for n in (n for n in names if n != base):
        found = compare(*([r for r in result.rows if r["policy"] == p] for p in (base, n)), headline)
        md += [f"**{conclusion(found, base, n)}**", ""]
    md += paired_section(result)
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


def paired_section(result: MatrixResult) -> list[str]:
    """The report's paired differences on the headline metric (`paired_results`), item by item on the same frozen
    specs."""
    metric = result.headline
    lines = [
        "## Paired differences",
        "",
        f"Each row minus another on the same {result.games * len(result.opponents) * len(result.sides)} items "
        f"(every cell), {metric} per item, mean with a 95% paired-bootstrap interval "
        f"({RESAMPLES} resamples, seed {SEED}): items better / worse.",
        "",
        "| rows | metric | difference [95% CI] | items | better / worse | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for a, b, found in paired_results(result):
        lines.append(paired_line(a, b, found, metric))
    return [*lines, ""]


def run_summary(
    out_dir: str | Path, env: Environment, candidate: str, baseline: str | None, rows: Sequence[str]
) -> list[str]:
    """The run summary of a rubric suite: the candidate's and the baseline's headline metric overall and per split,
    as metrics.json holds it, then each row's headline over every cell (`stage_lines`)."""
    matrix = read_matrix(out_dir)
    base, lineage = summary_rows(matrix, rows, baseline)
    headline = json.loads((Path(out_dir) / OUTPUTS["metrics"]).read_text())
    lines = [f"{candidate} vs {base}: headline metric (mean per episode)"]
    for row in (candidate, base):
        for metric, values in headline.get(row, {}).items():
            lines.append(f"  {row:<14} {metric}: " + ", ".join(f"{k} {v:.3f}" for k, v in values.items()))
    lines += stage_lines(matrix, lineage, env.evaluation_suite())
    paired = matrix.get("paired", {})
    starts = [pair for r in lineage if (pair := f"{candidate} - {r}") in paired]
    if starts:
        lines.append(f"paired, {candidate} minus an earlier row on the same items [95% interval]")
    for pair in starts:
        found = paired[pair]
        lines.append(
            f"  {pair:<24} {found['mean']:+.3f} [{found['ci_low']:+.3f}, {found['ci_high']:+.3f}] "
            f"{found['better']} better / {found['worse']} worse: {verdict(found)}"
        )
    return lines
