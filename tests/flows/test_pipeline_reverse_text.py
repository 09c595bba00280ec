"""reverse_text through the whole smoke pipeline (DVC alone), then `wander eval --env reverse_text`.

The run is tests/flows/conftest.py's `smoke_pipeline("reverse_text")`; what holds for every env is in
test_pipeline_envs.py, what reverse_text's outputs mean is here."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tasks.runtime.scratch_copy import run_in
from wander.cli import main


@pytest.fixture(scope="module")
def project(smoke_pipeline: Callable[[str], Path]) -> Path:
    """The session's smoke pipeline run of reverse_text (tests/flows/conftest.py), shared with test_pipeline_envs."""
    return smoke_pipeline("reverse_text")


@pytest.mark.slow
def test_reverse_text_runs_the_whole_pipeline(project: Path) -> None:
    for path in ("data/sft/train.jsonl", "data/models/grpo/main/model.safetensors", "data/eval/report.md"):
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
    assert set(headline) == {"grpo-main", "teacher"} and set(headline["teacher"]["reward"]) == {
        "all",
        "eval",
        "test",
    }
    register = json.loads((project / "data/metrics/register.json").read_text())
    assert register["version"] == 1 and "candidate_reward" in register
    report = (project / "data/eval/report.md").read_text()
    assert "## Sample episodes" in report and "<reversed_text>" in report


@pytest.mark.slow
def test_wander_eval_plays_reverse_text(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # In this process (tests/wander/test_cli.py covers the command's own process): `wander eval` is wander.cli.main.
    assert main(
        ["eval", "--env", "reverse_text", "--policy", f"sft={project / 'data/models/sft'}", "--policy", "expert",
         "--baseline", "expert", "--games", "2", "--out", str(project / "adhoc"), "--no-progress"]
    ) == 0  # fmt: skip
    out = capsys.readouterr()
    assert "stratum-2" in out.out + out.err and (project / "adhoc/headline_heatmap.png").is_file()
    metrics = json.loads((project / "adhoc/metrics.json").read_text())
    assert metrics["expert"]["reward"]["all"] == 1.0  # the slip-free teacher reverses every text


@pytest.mark.slow
def test_the_flow_on_the_finished_run_skips_every_stage_and_its_log_holds_only_its_lines(
    project: Path, tmp_path: Path
) -> None:
    # A copy: the shared run stays DVC's alone. Every stage is up to date, so the flow prints the skips and the
    # summary; reverse_text's env hashes a datasets table as it is built (preflight, summary), whose dill
    # disassembles a function into a stdout of its own: none of it may reach the flow's log.
    copy = tmp_path / "project"
    shutil.copytree(project, copy, symlinks=True)
    out = run_in(copy, [sys.executable, "-m", "flows.pipeline"])
    assert out.count("didn't change, skipping") == 8 and "grpo-main vs teacher: headline metric" in out
    assert "LOAD_GLOBAL" not in out and "RESUME" not in out
