"""The words and numbers both kinds of report write: a value with its 95% interval, the report's first
paragraph, the rows `dvc metrics` shows, and the run summary's line per stage.
"""

from __future__ import annotations

from collections.abc import Sequence

from wander.core.evaluation_suite import EvaluationSuite, Metric
from wander.eval.matrix_result import MatrixResult
from wander.policies.loading import is_scripted_name


def headline_policies(result: MatrixResult) -> list[str]:
    """The rows `dvc metrics` shows: the candidate (the last model row, not a scripted player) and the baseline."""
    models = [n for n, spec in result.policies.items() if n != result.baseline and not is_scripted_name(spec)]
    return [*models[-1:], result.baseline]


def with_interval(stats: dict, metric: Metric, name: str | None = None) -> str:
    """`stats[name]` with its interval, in the metric's digits (`name`: the metric's own by default)."""
    name, d = name or metric.name, metric.digits
    return f"{stats[name]:.{d}f} [{stats[name + '_ci_low']:.{d}f}, {stats[name + '_ci_high']:.{d}f}]"


def shown_value(stats: dict, metric: Metric) -> str:
    """A metric as a table shows it: with its interval, or the value alone (plain, or pooled without one)."""
    if metric.plain or f"{metric.name}_ci_low" not in stats:
        return f"{stats[metric.name]:.{metric.digits}f}"
    return with_interval(stats, metric)


def intro(result: MatrixResult) -> str:
    """The report's first paragraph: the policies, then the suite's words on its columns, games and intervals."""
    policies = ", ".join(f"`{n}`" for n in result.policies)
    return f"Policies: {policies}. " + result.suite.report.intro.format(
        groups=", ".join(result.opponents),
        sides=" and ".join(result.sides),
        games=result.per_cell,  # sampled: every sample's episodes (the pass@k section counts the items)
        seed=result.seed,
        decoding=result.decoding,
    )


def per_cell_words(result: MatrixResult, unit: str) -> str:
    """How many `unit`s (games, episodes) a cell holds, as the terminal tables say it: sampled, items x samples."""
    if result.samples == 1:
        return f"{result.games} {unit} per cell"
    return f"{result.games} items x {result.samples} samples ({result.per_cell} {unit}) per cell"


def summary_rows(matrix: dict, rows: Sequence[str], baseline: str | None) -> tuple[str, list[str]]:
    """The baseline (the report's: `baseline`, else the first row) and the rows of the run summary's stage lines:
    `rows` (the models in training order) then the baseline, those the matrix has."""
    base = baseline or next(iter(matrix["policies"]))
    return base, [r for r in dict.fromkeys([*rows, base]) if r in matrix["policies"]]


def stage_lines(matrix: dict, rows: Sequence[str], suite: EvaluationSuite) -> list[str]:
    """Each row's headline metric over every cell with its 95% interval, and a greedy row's exact results where the
    evaluation has them (the suite's chosen column group / metric pairs): what each stage added."""
    metric = suite.metric(suite.headline)
    picks = suite.report.extremes
    lines = [f"each stage: {metric.shown} over every cell [95% interval]"]
    for row in rows:
        overall = matrix["policies"][row]["overall"]
        value, low, high = (overall.get(metric.name + k) for k in ("", "_ci_low", "_ci_high"))
        text = f"  {row:<14} " + (f"{value:.3f}" if value is not None else "-")
        text += f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
        exact = matrix.get("exact", {}).get(row)
        if exact:
            groups = list(matrix["policies"][row]["opponents"])
            text += "   exact " + ", ".join(
                f"{groups[i]} {name} {exact[groups[i]][name]:.3f}" for i, name in picks
            )
        lines.append(text)
    return lines
