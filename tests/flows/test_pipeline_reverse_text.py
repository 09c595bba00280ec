"""reverse_text through the whole smoke pipeline (DVC alone), then `wander eval --env reverse_text`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from flows.scratch import copy_project, run_in

# What `dvc exp run -S env.name=reverse_text` cannot say: the env section is replaced whole (tic-tac-toe's own
# settings would be unknown keys), and GRPO's stages stop setting tic-tac-toe's opponent range and penalty.
ENV = {"name": "reverse_text", "num_groups": 4}  # 4 groups of 4 episodes per GRPO batch: one per stratum


def reverse_text_params(params: dict) -> dict:
    """The smoke params with the reverse_text env: every other env-dependent key is null (the env's default)."""
    params["env"] = dict(ENV)
    params["grpo"]["invalid_penalty"] = None
    params["grpo"]["curve_every"] = 0  # seconds saved: the curve's suite is tested with tic-tac-toe
    params["grpo"]["keep_best"] = False
    for stage in params["grpo"]["stages"].values():
        stage["random_move_prob"] = None
    lineage = dict(params["register"]["lineage"])
    params["evaluate"]["policies"] = {**lineage, "teacher": "expert-0.2"}
    return params


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_project(tmp_path_factory.mktemp("reverse_text"), profile="smoke")
    params = reverse_text_params(yaml.safe_load((root / "params.yaml").read_text()))
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run_in(root, ["dvc", "repro"])
    return root


@pytest.mark.slow
def test_reverse_text_runs_the_whole_pipeline(project: Path) -> None:
    for path in ("data/sft/train.jsonl", "data/models/grpo-strong/model.safetensors", "data/eval/report.md"):
        assert (project / path).is_file(), path
    episodes = [json.loads(line) for line in (project / "data/synth/episodes.jsonl").read_text().splitlines()]
    assert all(e["spec"]["text"] and e["values"]["lcs_ratio"] > 0 for e in episodes)  # the teacher reversed
    synth = json.loads((project / "data/metrics/synthesize.json").read_text())
    assert 0.8 < synth["teacher_reward"] < 1.0  # competent but imperfect
    curate = json.loads((project / "data/details/curate.json").read_text())
    assert (
        curate["dropped"]["exact"] > 0 and "outcome" not in curate["dropped"]
    )  # the env's floor, no outcomes
    rows = (project / "data/eval/matrix.csv").read_text().splitlines()
    assert rows[0].startswith(
        "policy,opponent,side,decoding,games,errored,reward,reward_ci_low,reward_ci_high"
    )
    cells = {tuple(r.split(",")[1:3]) for r in rows[1:]}
    assert cells == {(f"stratum-{k}", s) for k in range(4) for s in ("eval", "test")}
    headline = json.loads((project / "data/eval/metrics.json").read_text())
    assert set(headline) == {"grpo-strong", "teacher"} and set(headline["teacher"]["reward"]) == {
        "all",
        "eval",
        "test",
    }
    register = json.loads((project / "data/metrics/register.json").read_text())
    assert register["version"] == 1 and "candidate_reward" in register
    report = (project / "data/eval/report.md").read_text()
    assert "## Sample episodes" in report and "<reversed_text>" in report


@pytest.mark.slow
def test_wander_eval_plays_reverse_text(project: Path) -> None:
    out = run_in(
        project,
        [sys.executable, "-m", "flows.cli", "eval", "--env", "reverse_text", "--policy", "sft=data/models/sft",
         "--policy", "expert", "--baseline", "expert", "--games", "2", "--out", "adhoc"],
    )  # fmt: skip
    assert "stratum-2" in out and (project / "adhoc/non_loss_heatmap.png").is_file()
    metrics = json.loads((project / "adhoc/metrics.json").read_text())
    assert metrics["expert"]["reward"]["all"] == 1.0  # the slip-free teacher reverses every text
