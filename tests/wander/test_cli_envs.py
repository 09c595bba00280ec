"""`wander eval --env <name>` plays the rubric suite of the environments that generate their own data."""

from __future__ import annotations

import json

import pytest

from wander.cli import main


@pytest.mark.parametrize("name", ["double_check", "calculator", "workplace_assistant"])
def test_wander_eval_plays_the_env_suite(name: str, tmp_path, capsys) -> None:
    out = tmp_path / "report"
    argv = ["eval", "--env", name, "--policy", "expert", "--policy", "sloppy=expert-0.5", "--games", "2"]
    assert main([*argv, "--baseline", "expert", "--out", str(out), "--no-progress"]) == 0
    assert "stratum-2" in capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["expert"]["reward"]["all"] == 1.0  # the slip-free teacher gets every answer
    rows = (out / "matrix.csv").read_text().splitlines()
    cells = {tuple(r.split(",")[:3]) for r in rows[1:]}
    assert cells == {
        (p, f"stratum-{k}", s) for p in ("expert", "sloppy") for k in range(3) for s in ("eval", "test")
    }
    assert (out / "report.md").is_file()
