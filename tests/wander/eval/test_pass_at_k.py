"""pass@k and avg@k: the unbiased estimator, what passes, sample seeds, and a sampled matrix's rows and outputs."""

from __future__ import annotations

import gzip
import itertools
import json

import pytest
from pydantic import ValidationError

from wander import load_environment
from wander.core.evaluation_suite import EvaluationSuite, Metric
from wander.eval.config import EvaluateConfig
from wander.eval.evaluation import evaluate, text_table
from wander.eval.matrix import run_matrix
from wander.eval.pass_at_k import ladder, pass_at_k, pass_rule, sample_seed


@pytest.mark.parametrize(("n", "c"), [(1, 0), (1, 1), (5, 0), (5, 2), (6, 3), (6, 6)])
def test_the_estimator_is_the_chance_that_k_draws_hold_a_pass(n, c):
    outcomes = [1] * c + [0] * (n - c)
    for k in range(1, n + 1):
        draws = list(itertools.combinations(outcomes, k))
        assert pass_at_k(n, c, k) == pytest.approx(sum(any(d) for d in draws) / len(draws))
    assert pass_at_k(n, c, 1) == pytest.approx(c / n)
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(n, c, n + 1)


def test_the_ladder_and_the_sample_seeds():
    assert ladder(1) == (1,) and ladder(8) == (1, 8)
    assert sample_seed(7, 0) == 7  # sample 0 is the evaluation without samples
    seeds = [sample_seed(7, j) for j in range(8)]
    assert len(set(seeds)) == 8 and seeds == [sample_seed(7, j) for j in range(8)]
    assert seeds[1:] != [sample_seed(8, j) for j in range(1, 8)]  # every sample seed flows from the eval seed


def test_what_passes_comes_from_the_headline():
    # reverse_text: a reward bounded in [0, 1] passes at 1, the exact reversal; tic-tac-toe: a non-loss.
    assert pass_rule(load_environment("reverse_text").evaluation_suite(), None)[1] == 1.0
    metric, threshold = pass_rule(load_environment("tictactoe").evaluation_suite(), None)
    assert (metric.name, threshold) == ("non_loss", 1.0)
    unbounded = EvaluationSuite(metrics=(Metric("reward"),), groups=("stratum-0",))
    assert pass_rule(unbounded, 0.5)[1] == 0.5
    with pytest.raises(ValueError, match="unbounded mean.*set evaluate.pass_threshold"):
        pass_rule(unbounded, None)


def test_samples_without_sampling_are_refused_with_the_fix():
    with pytest.raises(ValidationError, match="set temperature above 0"):
        EvaluateConfig(samples=8)
    assert EvaluateConfig(samples=8, temperature=1.0).samples == 8
    with pytest.raises(ValidationError, match="samples"):
        EvaluateConfig(samples=0, temperature=1.0)


def config(tmp_path, samples: int, **change) -> EvaluateConfig:
    settings = dict(
        policies={"slips": "expert-0.5", "sure": "expert"},
        references=[],
        baseline=None,
        games=6,
        samples=samples,
        temperature=1.0,
        out_dir=str(tmp_path),
        progress=False,
    )
    return EvaluateConfig(**{**settings, **change})


def test_a_sampled_matrix_reports_pass_at_k_per_cell(tmp_path):
    env = load_environment("reverse_text")
    result = run_matrix(config(tmp_path, 4), env=env)
    once = run_matrix(config(tmp_path, 1), env=env)
    assert result.per_cell == 24 and len(result.episodes["slips"]) == 24 * 6
    for row in result.rows:
        assert (row["items"], row["samples"], row["games"]) == (6, 4, 24)
        # Every item has the same 4 samples: pass@1 is the share of exact reversals, avg@4 the mean reward.
        assert row["pass@1"] == pytest.approx(row["exact"]) and row["avg@4"] == pytest.approx(row["reward"])
        assert (
            row["pass@1"] <= row["pass@4"] and row["pass@4_ci_low"] <= row["pass@4"] <= row["pass@4_ci_high"]
        )
    slips = [r for r in result.rows if r["policy"] == "slips"]
    assert any(r["pass@4"] > r["pass@1"] for r in slips)  # a sure policy gains nothing; one that slips does
    assert all(r["pass@4"] == r["pass@1"] == 1.0 for r in result.rows if r["policy"] == "sure")
    # Sample 0 of each cell is the evaluation without samples, episode for episode; the others differ.
    first, second = result.episodes["slips"][:6], result.episodes["slips"][6:12]
    assert [ep.messages for ep in first] == [ep.messages for ep in once.episodes["slips"][:6]]
    assert [ep.spec for ep in second] == [ep.spec for ep in first]
    assert [ep.messages for ep in second] != [ep.messages for ep in first]
    assert "pass@1 [95% CI]" in text_table(result) and "6 items x 4 samples" in text_table(result)


def test_a_sampled_evaluation_writes_the_figures_everywhere(tmp_path):
    evaluate(config(tmp_path, 4), env={"name": "reverse_text"})
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert set(metrics["slips"]) == {"reward", "pass@1", "pass@4", "avg@4"}
    matrix = json.loads((tmp_path / "matrix.json").read_text())
    assert (matrix["samples"], matrix["pass_threshold"]) == (4, None)
    overall = matrix["policies"]["slips"]["overall"]
    assert (
        overall["items"] == 36 and overall["pass@4_ci_low"] <= overall["pass@4"] <= overall["pass@4_ci_high"]
    )
    assert metrics["slips"]["pass@4"]["all"] == round(overall["pass@4"], 4)
    report = (tmp_path / "report.md").read_text()
    assert "## pass@k over 4 samples" in report and "6 items per cell, 36 per policy" in report
    with gzip.open(tmp_path / "episodes.jsonl.gz", "rt") as lines:
        records = [json.loads(line) for line in lines]
    assert [r["sample"] for r in records[:24]] == [j for j in range(4) for _ in range(6)]
    assert not (tmp_path / ".journal.jsonl").exists()  # the report is written: the journal is gone


def test_one_sample_keeps_the_outputs_of_before(tmp_path):
    result = evaluate(config(tmp_path, 1, temperature=0.0), env={"name": "reverse_text"})
    assert not any("pass@1" in row or "items" in row for row in result.rows)
    assert "samples" not in json.loads((tmp_path / "matrix.json").read_text())
    assert "pass@" not in (tmp_path / "report.md").read_text() + text_table(result)
    with gzip.open(tmp_path / "episodes.jsonl.gz", "rt") as lines:
        assert "sample" not in json.loads(next(lines))


def test_a_sampled_game_matrix_reports_pass_at_k_too(tmp_path):
    settings = dict(policies={"weak": "minimax-0.8"}, opponents=["random"], games=5)
    result = evaluate(config(tmp_path, 3, **settings), env={"name": "tictactoe"})
    assert {r["samples"] for r in result.rows} == {3}
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert {"pass@1", "pass@3", "avg@3"} <= set(metrics["weak"]["all"])
    assert "## pass@k over 3 samples" in (tmp_path / "report.md").read_text()
