"""Paired comparisons: per-item differences on the same frozen specs with a paired-bootstrap interval, checked by
hand on small cases, refused on unpaired episodes, and in a rubric suite's report (a real evaluation)."""

from __future__ import annotations

import pytest

from wander import load_environment
from wander.eval.config import EvaluateConfig
from wander.eval.evaluation import write_report
from wander.eval.matrix import run_matrix
from wander.eval.paired import paired_difference, paired_episodes, verdict


def test_a_paired_interval_matches_the_hand_computed_bootstrap():
    # Differences [1, 0, 0, 0]: a resample's mean is k/4 with k ~ Binomial(4, 1/4); P(k >= 3) = 0.051 and
    # P(k = 4) = 0.004, so the 97.5th percentile is 0.75; P(k = 0) = 0.316, so the 2.5th is 0.
    found = paired_difference([0, 0, 1, 1], [1, 0, 1, 1], resamples=20000)
    assert (found["mean"], found["ci_low"], found["ci_high"]) == (0.25, 0.0, 0.75)
    assert (found["n"], found["better"], found["worse"]) == (4, 1, 0)
    # The same value on both sides of every item: no difference and no spread, however far the values vary.
    same = paired_difference([0.1, 0.9, 0.5], [0.1, 0.9, 0.5])
    assert (same["mean"], same["ci_low"], same["ci_high"]) == (0.0, 0.0, 0.0)
    # 200 items, 30 better by 1 and none worse: the interval is the binomial's, about 0.15 +- 0.05.
    many = paired_difference([0.0] * 200, [1.0] * 30 + [0.0] * 170)
    assert 0.09 < many["ci_low"] < 0.11 and 0.19 < many["ci_high"] < 0.21
    assert paired_difference([0.0] * 200, [1.0] * 30 + [0.0] * 170) == many  # seeded: the same interval


def test_items_that_differ_are_refused():
    with pytest.raises(ValueError, match="same items on both sides"):
        paired_difference([1, 0], [1])
    env = load_environment("reverse_text", num_train=4, num_eval=8, num_test=8)
    a = env.rollout(env.teacher_policy(0.0, 0), list(env.get_dataset("eval")))
    b = env.rollout(env.teacher_policy(0.0, 0), list(env.get_dataset("test")))
    with pytest.raises(ValueError, match="did not play the same specs"):
        paired_episodes(a, b, "reward")


def test_the_rubric_report_shows_each_row_paired_with_the_one_before_and_the_first(tmp_path):
    env = load_environment("reverse_text", num_train=4, num_eval=16, num_test=16)
    policies = {"sloppy": "expert-0.9", "better": "expert-0.3", "perfect": "expert"}
    config = EvaluateConfig(
        baseline=None, policies=policies, references=[], games=4, out_dir=str(tmp_path), progress=False
    )
    result = run_matrix(config, env=env)
    write_report(result, tmp_path)
    report = (tmp_path / "report.md").read_text()
    section = report.split("## Paired differences", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and " - " in line]
    assert [r.split(" | ")[0] for r in rows] == [
        "| better - sloppy",
        "| perfect - better",
        "| perfect - sloppy",
    ]
    perfect_vs_sloppy = paired_episodes(result.episodes["sloppy"], result.episodes["perfect"], "reward")
    assert perfect_vs_sloppy["ci_low"] > 0 and perfect_vs_sloppy["worse"] == 0
    assert rows[2].endswith("| better |") and f"| {perfect_vs_sloppy['n']} |" in rows[2]
    # matrix.json keeps the same differences (the register gate reads them), and the run summary prints the
    # candidate's against each earlier row.
    import json

    from wander.eval.rubric_report import run_summary

    stored = json.loads((tmp_path / "matrix.json").read_text())["paired"]
    assert list(stored) == ["better - sloppy", "perfect - better", "perfect - sloppy"]
    assert stored["perfect - sloppy"] == pytest.approx(perfect_vs_sloppy)
    lines = run_summary(tmp_path, env, "perfect", None, ["sloppy", "better", "perfect"])
    shown = lines[lines.index("paired, perfect minus an earlier row on the same items [95% interval]") + 1 :]
    found = stored["perfect - sloppy"]
    assert shown == [
        f"  perfect - sloppy         {found['mean']:+.3f} [{found['ci_low']:+.3f}, {found['ci_high']:+.3f}] "
        f"{found['better']} better / 0 worse: better",
        f"  perfect - better         {stored['perfect - better']['mean']:+.3f} "
        f"[{stored['perfect - better']['ci_low']:+.3f}, {stored['perfect - better']['ci_high']:+.3f}] "
        f"{stored['perfect - better']['better']} better / {stored['perfect - better']['worse']} worse: "
        f"{verdict(stored['perfect - better'])}",
    ]
