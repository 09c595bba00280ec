"""The report of a matrix suite (an env whose `evaluation_suite().kind` is "matrix", a game's opponent matrix):
headline metrics, the whole matrix as JSON, a terminal table, a Markdown report and the run summary's lines. The
file names and the tidy CSV are every kind's (`wander.eval.outputs`).

Every table, label and sample pick comes from the suite (`wander.core.evaluation_suite`); the exact results and
the worst-case section come from the env's capabilities, when it has them (`wander.core.capabilities`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from wander.core.capabilities import WorstCase
from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.core.evaluation_suite import Metric
from wander.eval.cells import pooled, summary
from wander.eval.compare import compare, conclusion
from wander.eval.matrix_result import MatrixResult
from wander.eval.outputs import OUTPUTS, finite, read_matrix
from wander.eval.pass_at_k import (
    headline_figures,
    markdown_lines,
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

STRING_FIELDS = ("policy", "opponent", "side", "decoding")


# ----- metrics -----


def matrix_dict(result: MatrixResult) -> dict:
    """The whole matrix as nested numbers: policies.<row>.overall and policies.<row>.opponents.<opponent>.<side>."""
    policies = {}
    for name in result.policies:
        rows = [r for r in result.rows if r["policy"] == name]
        opponents = {}
        for opponent in result.opponents:
            cells = [r for r in rows if r["opponent"] == opponent]
            sides = {r["side"]: {k: v for k, v in r.items() if k not in STRING_FIELDS} for r in cells}
            opponents[opponent] = {**sides, "both": summary_and_figures(cells, result.suite)}
        policies[name] = {"overall": summary_and_figures(rows, result.suite), "opponents": opponents}
    clean = json.loads(json.dumps(policies), parse_constant=lambda _: None)  # NaN -> null
    out = {"games_per_cell": result.games, "seed": result.seed}
    if result.samples > 1:  # absent for one sample: that matrix.json is the one before samples existed
        out.update(samples=result.samples, pass_threshold=result.pass_threshold)
    return {
        **out,
        "policies": clean,
        "exact": result.exact,
        "worst_case": result.worst,
    }


def _rate(result: MatrixResult, rows: list[dict], name: str) -> float | None:
    return finite(round(pooled(rows, result.suite.metric(name))["mean"], 4))


def headline_metrics(result: MatrixResult) -> dict:
    """A few numbers a person can compare across experiments, both sides pooled, for the candidate and the baseline.

    Per row: the suite's overview metrics pooled over the whole row, its chosen metrics in chosen column groups
    (tic-tac-toe: win and loss against the weakest opponent, loss against the strongest), and the same from the
    exact results where the row has them. The whole matrix (every row, opponent, side, interval and count) is
    matrix.json, matrix.csv and the report; DVC shows every number of a metrics file as a column, so this file
    stays small enough for `dvc exp show`.
    """
    layout = result.suite.report
    picks = [(result.opponents[i], metric) for i, metric in layout.extremes]
    out: dict = {}
    for name in headline_policies(result):
        rows = [r for r in result.rows if r["policy"] == name]
        head = {"all": {m: _rate(result, rows, m) for m in layout.overview} | headline_figures(result, rows)}
        for opponent, metric in picks:
            cells = [r for r in rows if r["opponent"] == opponent]
            head.setdefault(opponent, {})[metric] = _rate(result, cells, metric)
        if name in result.exact:
            exact = result.exact[name]
            head["exact"] = {o: {} for o in dict.fromkeys(o for o, _ in picks)}
            for opponent, metric in picks:
                head["exact"][opponent][metric] = round(exact[opponent][metric], 4)
        out[name] = head
    return out


# ----- text -----


def _header(metrics: Sequence[Metric], first: str) -> list[str]:
    """A Markdown table header: the first columns, then each metric (a plain one right-aligned)."""
    return [
        f"| {first} | " + " | ".join(m.shown for m in metrics) + " |",
        "|---" * first.count("|") + "|---" + "".join("|---:" if m.plain else "|---" for m in metrics) + "|",
    ]


def text_table(result: MatrixResult) -> str:
    """The matrix as a fixed-width table for a terminal: the headline with its interval, the others' values."""
    suite, layout = result.suite, result.suite.report
    metrics = suite.columns("terminal")
    head = f"{'policy':<16}{layout.group_label:<14}{layout.side_label:<8}"
    for m in metrics:
        head += (
            f"{(m.short or m.shown) + ' [95% CI]':>22}"
            if m.name == suite.headline
            else f"{m.short or m.shown:>{_width(m)}}"
        )
    scripted = any(r["decoding"] == "scripted" for r in result.rows)
    note = " (scripted players follow their own rule)" if scripted else ""
    sampled = result.samples > 1
    head += table_head(result) if sampled else ""
    lines = [f"{per_cell_words(result, 'games')}; decoding: {result.decoding}{note}", head]
    for r in result.rows:
        line = f"{r['policy'][:15]:<16}{r['opponent']:<14}{r['side']:<8}"
        for m in metrics:
            line += (
                f"{with_interval(r, m):>22}"
                if m.name == suite.headline
                else f"{r[m.name]:>{_width(m)}.{m.digits}f}"
            )
        lines.append(line + (table_cells(result, r) if sampled else ""))
    return "\n".join(lines)


def _width(metric: Metric) -> int:
    return max(6, len(metric.short or metric.shown) + 2)


def sample_games(
    episodes: list[Episode], picks: Sequence[tuple[str, Callable[[Episode], bool]]]
) -> list[tuple[str, Episode]]:
    """One episode per pick (tic-tac-toe: a win, a loss, a game with an invalid move), the first in suite order
    that no earlier pick took, when there is one."""
    chosen: list[tuple[str, Episode]] = []
    for kind, test in picks:
        taken = {id(ep) for _, ep in chosen}
        match = next((ep for ep in episodes if test(ep) and id(ep) not in taken), None)
        if match is not None:
            chosen.append((kind, match))
    return chosen


def exact_lines(result: MatrixResult) -> list[str]:
    """Markdown: the exact table of every greedy model row (the env's columns, both sides pooled)."""
    if not result.exact:
        return []
    columns = result.exact_columns
    md = [
        "## Exact results (greedy model rows, no sampling noise)",
        "",
        result.exact_note,
        "",
        f"| policy | {result.suite.report.group_label} | " + " | ".join(label for _, label in columns) + " |",
        "|---|---" + "|---" * len(columns) + "|",
    ]
    for name, rows in result.exact.items():
        for opponent, r in rows.items():
            md.append(f"| {name} | {opponent} | " + " | ".join(f"{r[key]:.3f}" for key, _ in columns) + " |")
    return md + [""]


def markdown_report(result: MatrixResult) -> str:
    """The report: settings, plots, summary, the full matrix, comparisons and sample games."""
    suite, layout = result.suite, result.suite.report
    headline = suite.metric(suite.headline)
    names = list(result.policies)
    cols = [(o, s) for o in result.opponents for s in result.sides]
    md = [
        f"# {layout.title}",
        "",
        intro(result),
        "",
        "| policy | spec | decoding | games | seconds | games/s |",
        "|---|---|---|---:|---:|---:|",
    ]
    for n in names:
        rows = [r for r in result.rows if r["policy"] == n]
        games, seconds = sum(r["games"] for r in rows), result.seconds.get(n, float("nan"))
        md.append(
            f"| {n} | `{result.policies[n]}` | {rows[0]['decoding']} | {games} | {seconds:.1f} | {games / seconds:.0f} |"
        )
    md += [
        "",
        f"![{headline.shown} heatmap]({OUTPUTS['heatmap']})",
        "",
        f"![{headline.shown} by policy]({OUTPUTS['bars']})",
        "",
    ]

    metrics = suite.columns("summary")
    md += ["## Summary per policy", "", *_header(metrics, "policy")]
    for n in names:
        s = summary([r for r in result.rows if r["policy"] == n], suite)
        md.append(f"| {n} | " + " | ".join(shown_value(s, m) for m in metrics) + " |")

    md += [
        "",
        *markdown_lines(result),
        f"## {suite.plot_labels.title} per cell",
        "",
        "| policy | " + " | ".join(f"{o} {s}" for o, s in cols) + " |",
    ]
    md.append("|---" * (len(cols) + 1) + "|")
    for n in names:
        md.append(
            f"| {n} | " + " | ".join(with_interval(result.row(n, o, s), headline) for o, s in cols) + " |"
        )

    metrics = suite.columns("cells")
    md += ["", "## Every cell", ""]
    for n in names:
        md += [f"### {n}", "", *_header(metrics, f"{layout.group_label} | {layout.side_label}")]
        for o, s in cols:
            r = result.row(n, o, s)
            md.append(f"| {o} | {s} | " + " | ".join(shown_value(r, m) for m in metrics) + " |")
        md.append("")

    base = result.baseline
    if len(names) > 1:
        above, below = ("below", "above") if headline.lower_is_better else ("above", "below")
        md += [
            f"## Compared with `{base}`",
            "",
            f"B is better when its {headline.shown} interval lies wholly {above} the",
        ]
        md += [f"baseline's, worse when wholly {below}; overlapping intervals are no clear difference.", ""]
        for n in (n for n in names if n != base):
            found = compare(*([r for r in result.rows if r["policy"] == p] for p in (base, n)), headline)
            md += [
                f"**{conclusion(found, base, n)}**",
                "",
                f"| column | {base} | {n} | verdict |",
                "|---|---|---|---|",
            ]
            for c in found:
                a, b = (with_interval(c, headline, k) for k in ("a", "b"))
                md.append(f"| {c['opponent']} {c['side']} | {a} | {b} | {c['verdict']} |")
            md.append("")

    md += exact_lines(result)
    if result.worst and result.worst_lines is not None:
        md += result.worst_lines(result.worst)
    if result.curves:
        md += ["## Learning curve", "", f"![learning curve]({OUTPUTS['curve']})", ""]
    md += ["## Sample games", ""]
    for n in names:
        for kind, ep in sample_games(result.episodes[n], layout.samples):
            title = (
                layout.sample_title(ep)
                if layout.sample_title
                else f"in {ep.spec.get('opponent')}, {ep.spec.get('side')}, seed {ep.seed}"
            )
            note = layout.sample_note(ep) if layout.sample_note else f"Reward {ep.reward:.3f}."
            md += [f"### {n}: {kind} {title}", "", note, "", "```text", result.render(ep), "```", ""]
    return "\n".join(md).rstrip() + "\n"


def run_summary(
    out_dir: str | Path, env: Environment, candidate: str, baseline: str | None, rows: Sequence[str]
) -> list[str]:
    """The run summary of a matrix suite: the candidate against the baseline per column group in the suite's
    outcome metrics (both sides pooled; a greedy candidate's exact results next to them), the candidate's worst
    case where the env has one (`WorstCase.worst_case_summary`), then each row's headline (`stage_lines`)."""
    suite = env.evaluation_suite()
    layout = suite.report
    matrix = read_matrix(out_dir)
    base, lineage = summary_rows(matrix, rows, baseline)
    metrics = [suite.metric(name) for name in layout.outcomes or (suite.headline,)]
    names = " / ".join(m.shown for m in metrics)
    policies = matrix["policies"]
    exact = matrix.get("exact", {}).get(candidate, {})
    lines = [f"{candidate} vs {base}: {names} per {layout.group_label} ({suite.plot_labels.pooled})"]
    for group in policies[candidate]["opponents"]:
        cells = []
        for row in (candidate, base):
            pooled_cell = policies[row]["opponents"][group]["both"]
            cells.append(" / ".join(f"{pooled_cell[m.name]:.{m.digits}f}" for m in metrics))
        e = exact.get(group)  # a greedy model's exact expectation: the numbers without sampling noise
        note = ""
        if e and all(m.name in e for m in metrics):
            note = f"   {candidate} exact " + " / ".join(f"{e[m.name]:.3f}" for m in metrics)
        lines.append(f"  {group:<14} {cells[0]:<22} {base} {cells[1]}{note}")
    worst = matrix.get("worst_case", {}).get(candidate)
    if worst and isinstance(env, WorstCase):
        lines += env.worst_case_summary(worst)
    return lines + stage_lines(matrix, lineage, suite)
