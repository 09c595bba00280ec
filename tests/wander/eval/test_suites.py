"""Every env's evaluation suite is data its rows, tables and comparisons agree with."""

from __future__ import annotations

import pytest

from wander import load_environment
from wander.core.evaluation_suite import MEAN, RATE, RATIO, EvaluationSuite, Metric, ReportLayout
from wander.core.registry import environment_names
from wander.eval.cells import pooled
from wander.eval.compare import BETTER, WORSE, compare
from wander.eval.config import EvaluateConfig
from wander.eval.evaluation import text_table, write_report
from wander.eval.matrix import run_matrix

ENVS = ("tictactoe", "reverse_text", "double_check", "calculator", "workplace_assistant", "coding")


def test_every_shipped_env_is_checked_here():
    assert set(ENVS) <= set(environment_names())


@pytest.mark.parametrize("name", ENVS)
def test_every_metric_of_the_suite_is_in_its_matrix_rows(name, tmp_path):
    env = load_environment(name)
    suite = env.evaluation_suite()
    config = EvaluateConfig(
        baseline=None,
        policies={"sure": "expert", "slips": "expert-0.5"},
        references=[],
        games=2,
        opponents=list(suite.groups[:2]),
        out_dir=str(tmp_path),
        progress=False,
    )
    result = run_matrix(config, env=env)
    assert result.suite == suite and result.rows
    for row in result.rows:
        for metric in suite.metrics:
            # Every cell has an interval, and the counts or spread its metric pools by.
            keys = [metric.name, f"{metric.name}_ci_low", f"{metric.name}_ci_high"]
            keys += [metric.count, metric.trials_count] if metric.kind == RATIO else []
            keys += [metric.count or metric.failures] if metric.kind == RATE else []
            keys += [f"{metric.name}_sd"] if metric.kind == MEAN and metric.spread else []
            assert set(keys) <= set(row), (metric.name, sorted(set(keys) - set(row)))
            if metric.bounds:
                low, high = metric.bounds
                assert low <= row[keys[1]] <= row[keys[0]] <= row[keys[2]] <= high, (metric.name, row)
        assert [column for column, _ in suite.spec_columns] == [
            k for k in row if k in dict(suite.spec_columns)
        ]
    write_report(result, tmp_path)  # every table, label and pick of the suite renders
    assert suite.report.title in (tmp_path / "report.md").read_text()
    assert len(text_table(result).splitlines()) == 2 + len(result.rows)
    headline = suite.comparable(suite.headline)  # the headline can always be compared
    sure, slips = ([r for r in result.rows if r["policy"] == p] for p in ("sure", "slips"))
    assert {c["metric"] for c in compare(sure, slips, headline)} == {suite.headline}


def rubric_rows(suite: EvaluationSuite, metric: str, mean: float, sd: float) -> list[dict]:
    return [
        {"opponent": g, "side": s, "games": 100, metric: mean, f"{metric}_sd": sd}
        for g in suite.groups
        for s in suite.sides
    ]


def test_compare_takes_the_direction_from_the_suite():
    suite = load_environment("workplace_assistant").evaluation_suite()
    assert suite.metric("side_effects").lower_is_better and not suite.metric("state_checks").lower_is_better
    # B has clearly more of the metric than A in every column: worse for side effects, better for state checks.
    for metric, expected in (("side_effects", WORSE), ("state_checks", BETTER)):
        a, b = rubric_rows(suite, metric, 0.0, 0.0), rubric_rows(suite, metric, 0.4, 0.5)
        assert {c["verdict"] for c in compare(a, b, suite.comparable(metric))} == {expected}, metric
    # reverse_text declares nothing lower-is-better: the default is higher.
    assert not any(m.lower_is_better for m in load_environment("reverse_text").evaluation_suite().metrics)


def test_a_suite_that_names_what_it_lacks_is_refused():
    win = Metric("win", RATE, count="wins")
    with pytest.raises(ValueError, match=r"names metrics it does not have: \['draw'\]"):
        EvaluationSuite(metrics=(win,), groups=("g",), headline="win", report=ReportLayout(cells=("draw",)))
    with pytest.raises(ValueError, match="needs either `count`"):
        Metric("win", RATE)
    with pytest.raises(ValueError, match="no metric's count column"):
        EvaluationSuite(
            metrics=(win, Metric("non_loss", RATE, failures="losses")), groups=("g",), headline="win"
        )
    with pytest.raises(ValueError, match="cannot compare on 'turns'"):
        EvaluationSuite(metrics=(Metric("turns", spread=False),), groups=("g",), headline="turns")
    with pytest.raises(ValueError, match="no metric"):
        load_environment("reverse_text").evaluation_suite().lower_is_better("side_effects")


def test_a_bounded_mean_keeps_its_interval_inside_its_bounds():
    # Two texts reversed at 0.94 and 1.0: the normal interval of their mean reaches past 1, which no share can.
    row = {"games": 2, "lcs_ratio": 0.97, "lcs_ratio_sd": 0.0424, "tool_calls": 0.97, "tool_calls_sd": 0.0424}
    rows = [row]
    free = pooled(rows, Metric("tool_calls"))
    share = pooled(rows, Metric("lcs_ratio", bounds=(0.0, 1.0)))
    assert free["ci_high"] > 1.0 and share["ci_high"] == 1.0
    assert (
        (share["mean"], share["ci_low"])
        == (free["mean"], free["ci_low"])
        == (0.97, pytest.approx(0.9112, 1e-3))
    )
    shares = load_environment("calculator").evaluation_suite()
    assert [m.name for m in shares.metrics if m.bounds == (0.0, 1.0)] == ["reward", "correct", "format"]


def test_a_count_s_interval_does_not_reach_below_zero():
    # 3 tool errors in 400 episodes: the normal interval of the mean reaches below 0, which no count can.
    row = {"games": 400, "tool_errors": 0.0075, "tool_errors_sd": 0.0863}
    free = pooled([row], Metric("tool_errors"))
    assert free["ci_low"] < 0.0
    counts = {"calculator": ["tool_errors"], "workplace_assistant": ["side_effects", "tool_errors"]}
    for name, metrics in counts.items():
        suite = load_environment(name).evaluation_suite()
        for metric in metrics:
            counted = pooled([{**row, metric: 0.0075, f"{metric}_sd": 0.0863}], suite.metric(metric))
            assert (counted["ci_low"], counted["ci_high"]) == (0.0, free["ci_high"]), (name, metric)


def test_a_share_of_zeros_and_ones_pooled_over_cells_gets_a_wilson_interval_not_a_zero_width_one():
    # 0 of 164 solved over two cells of 82: a normal interval of the pooled mean was [0, 0].
    import statistics

    from wander.core.stats import wilson_interval

    def row(values: list[float]) -> dict:
        return {
            "games": len(values),
            "solved": statistics.mean(values),
            "solved_sd": statistics.stdev(values),
        }

    metric = Metric("solved", bounds=(0.0, 1.0))
    none = pooled([row([0.0] * 82), row([0.0] * 82)], metric)
    assert (none["mean"], none["ci_low"], round(none["ci_high"], 3)) == (0.0, 0.0, 0.023)
    some = pooled([row([1.0] * 3 + [0.0] * 7), row([1.0] * 5 + [0.0] * 5)], metric)
    assert (some["ci_low"], some["ci_high"]) == pytest.approx(wilson_interval(8, 20))
    # Any other value in a cell (a partial score): the normal interval of the pooled mean, as before.
    partial = pooled([row([0.5] + [0.0] * 9), row([1.0] * 5 + [0.0] * 5)], metric)
    half = 1.959964 * statistics.stdev([0.5] + [0.0] * 9 + [1.0] * 5 + [0.0] * 5) / 20**0.5
    assert (partial["ci_low"], partial["ci_high"]) == pytest.approx((0.275 - half, 0.275 + half), abs=1e-4)
