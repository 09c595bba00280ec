"""`wander eval --env <name>` plays the rubric suite of the environments that generate their own data."""

from __future__ import annotations

import json

import pytest

from flows.cli import main


@pytest.mark.parametrize("name", ["double_check", "calculator"])
def test_wander_eval_plays_the_env_suite(name: str, tmp_path, capsys) -> None:
    out = tmp_path / "report"
    argv = ["eval", "--env", name, "--policy", "expert", "--policy", "sloppy=expert-0.5", "--games", "2"]
    assert main([*argv, "--baseline", "expert", "--out", str(out), "--no-progress"]) == 0
    assert "stratum-2" in capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["expert"]["reward"]["all"] == 1.0  # the slip-free teacher gets every answer
    assert set(metrics["expert"]["reward"]) == {"all", "eval", "test"}
    sloppy = json.loads((out / "matrix.json").read_text())["policies"]["sloppy"][
        "overall"
    ]  # the whole matrix
    assert sloppy["games"] == 12 and sloppy["reward_ci_low"] <= sloppy["reward"] <= sloppy["reward_ci_high"]
    assert (out / "report.md").is_file()
