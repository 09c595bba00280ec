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

from tasks.runtime.scratch_copy import copy_project, run_in

# Every environment the smoke pipeline runs end to end, each with `dvc exp run -S env.name=<name>` alone: the
# env's settings block (none: its defaults), its evaluation rows (`teacher` and its references) and its registered
# model name all follow from the name.
PIPELINE_ENVS = [
    "reverse_text",
    "double_check",
    "calculator",
    "workplace_assistant",
    "coding",
    "chess",
    "reasoning_gym",
]


@pytest.fixture(scope="session")
def smoke_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """`smoke_pipeline(name)`: a scratch project where `dvc exp run -S env.name=<name>` ran the smoke pipeline.

    Run once per env and session; tests only read it (copy it before changing anything).
    """
    done: dict[str, Path | BaseException] = {}

    def project(name: str) -> Path:
        if name not in done:
            try:
                root = copy_project(tmp_path_factory.mktemp(f"pipeline-{name}"), profile="smoke")
                run_in(root, ["dvc", "exp", "run", "-S", f"env.name={name}"])
                done[name] = root
            except BaseException as e:  # a timeout too: the next tests fail at once, no rerun
                done[name] = e
                raise
        if isinstance(done[name], BaseException):
            raise RuntimeError(f"the smoke pipeline of {name} failed earlier in this session") from done[name]
        return done[name]

    return project


# Games scored by an opponent matrix (outcomes per opponent, no reward columns): their own file checks the numbers.
MATRIX_ENVS = ["chess"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that takes `pipeline_env` runs once per environment of PIPELINE_ENVS; one that takes `rubric_env`, once
    per environment whose suite is the rubric's means (all but MATRIX_ENVS)."""
    if "pipeline_env" in metafunc.fixturenames:
        metafunc.parametrize("pipeline_env", sorted(PIPELINE_ENVS))
    if "rubric_env" in metafunc.fixturenames:
        metafunc.parametrize("rubric_env", sorted(set(PIPELINE_ENVS) - set(MATRIX_ENVS)))
