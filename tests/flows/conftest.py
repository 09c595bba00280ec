"""The smoke pipeline of every environment, run once per session and shared by every test that reads its outputs.

An environment's end-to-end test (issue 14: the smoke profile runs the whole pipeline for every environment) is one
entry of `PIPELINE_ENVS`: `tests/flows/test_pipeline_envs.py` then checks every stage for it, and the env's own
end-to-end tests, in `test_pipeline_<name>.py`, ask `smoke_pipeline("<name>")` for the same finished project: one
`dvc repro` per env and session, and under xdist all of them on one worker (tests/conftest.py groups them by name). Tic-tac-toe's pipeline goes through the Prefect flow instead (tests/flows/test_pipeline.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from flows.scratch import copy_project, run_in

# Per environment, what `dvc exp run -S env.name=<name>` cannot say: the env section is replaced whole
# (tic-tac-toe's own settings would be unknown keys), and the evaluation's reference row (the env's teacher).
PIPELINE_ENVS: dict[str, dict] = {
    # 4 groups of 4 episodes per GRPO batch: one per stratum.
    "reverse_text": {"env": {"num_groups": 4}, "teacher": "expert-0.2"},
}


def env_smoke_params(params: dict, name: str) -> dict:
    """The smoke params with env `name`: every other env-dependent key is null (the env's default)."""
    settings = PIPELINE_ENVS[name]
    params["env"] = {"name": name, **settings.get("env", {})}
    params["grpo"]["invalid_penalty"] = None
    params["grpo"]["curve_every"] = 0  # seconds saved: the curve's suite is tested with tic-tac-toe
    params["grpo"]["keep_best"] = False
    for stage in params["grpo"]["stages"].values():
        stage["random_move_prob"] = None
    lineage = dict(params["register"]["lineage"])
    params["evaluate"]["policies"] = {**lineage, "teacher": settings["teacher"]}
    return params


@pytest.fixture(scope="session")
def smoke_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """`smoke_pipeline(name)`: a scratch project where `dvc repro` ran the smoke pipeline with env `name`.

    Run once per env and session; tests only read it (copy it before changing anything).
    """
    done: dict[str, Path | BaseException] = {}

    def project(name: str) -> Path:
        if name not in done:
            try:
                root = copy_project(tmp_path_factory.mktemp(f"pipeline-{name}"), profile="smoke")
                params = env_smoke_params(yaml.safe_load((root / "params.yaml").read_text()), name)
                (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
                run_in(root, ["dvc", "repro"])
                done[name] = root
            except BaseException as e:  # a timeout too: the next tests fail at once, no rerun
                done[name] = e
                raise
        if isinstance(done[name], BaseException):
            raise RuntimeError(f"the smoke pipeline of {name} failed earlier in this session") from done[name]
        return done[name]

    return project


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that takes `pipeline_env` runs once per environment of PIPELINE_ENVS."""
    if "pipeline_env" in metafunc.fixturenames:
        metafunc.parametrize("pipeline_env", sorted(PIPELINE_ENVS))
