"""`make run` with params the environment cannot run stops at once, in one message, before any stage."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tasks.runtime.scratch_copy import copy_project, project_env


def test_the_flow_refuses_params_its_env_cannot_run_before_the_first_stage(tmp_path: Path) -> None:
    root = copy_project(tmp_path / "copy")
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["env"]["name"] = "reverse_text"  # 50 eval episodes a stratum; an explicit evaluate.games asks 200
    params["evaluate"]["games"] = 200
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    done = subprocess.run(
        [sys.executable, "-m", "flows.pipeline"],
        cwd=root,
        env=project_env(root),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "cannot run with env 'reverse_text'; nothing was run" in done.stderr
    assert "evaluate.games / evaluate.opponents: reverse_text: the eval split has 50 episodes" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (root / "data").exists() and not (root / "dvc.lock").exists()  # no stage ran
