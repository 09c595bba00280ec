"""The register stage killed (SIGKILL) at each of its registry writes, then run again: one version, its alias and
its tags consistent, as if it had never been stopped."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest

from tasks.params.evaluation_sections import Register
from tasks.params.sections import Params
from tasks.register import KEY_TAG, run
from tasks.runtime import tracking
from wander import load_environment
from wander.policies.scratch_model import build_scratch_model

from .test_register import TINY, evaluate_grpo

# The child: the register stage as the pipeline runs it, with one registry write wrapped to kill the process just
# before or just after it (the write itself is MLflow's real one, on the project's real sqlite store).
CHILD = """
import functools, os, signal, sys
import mlflow.pyfunc
from mlflow.store.model_registry.sqlalchemy_store import SqlAlchemyStore
from tasks.runtime import tracking
from tasks.params.sections import Params
from tasks.params.evaluation_sections import Register
from tasks.register import run

owner_name, method, when = sys.argv[1:4]
owner = {"pyfunc": mlflow.pyfunc, "registry": SqlAlchemyStore}[owner_name]
original = getattr(owner, method)

@functools.wraps(original)
def killing(*args, **kwargs):
    if when == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    result = original(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
    return result

setattr(owner, method, killing)
config = Params(register=Register(lineage={"grpo": "data/models/grpo"}, candidate="grpo", baseline=None))
with tracking.stage_run("register", root="."):
    run(config)
"""

# Every write of a first registration, in the order it makes them.
POINTS = [
    ("pyfunc", "log_model", "before"),
    ("pyfunc", "log_model", "after"),
    ("registry", "create_registered_model", "after"),
    ("registry", "create_model_version", "before"),
    ("registry", "create_model_version", "after"),
    ("registry", "set_registered_model_alias", "before"),
    ("registry", "set_registered_model_alias", "after"),
]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with a scratch model `grpo` and its evaluation, nothing registered yet."""
    root = tmp_path_factory.mktemp("register-evaluated")
    build_scratch_model(load_environment("tictactoe").corpus(), root / "data/models/grpo", TINY)
    with pytest.MonkeyPatch.context() as m:
        m.chdir(root)
        evaluate_grpo()
    return root


@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS, ids=["-".join(p[1:]) for p in POINTS])
def test_register_killed_at_any_write_then_rerun_leaves_one_consistent_version(
    evaluated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: tuple[str, str, str]
):
    root = tmp_path / "project"
    shutil.copytree(evaluated, root)
    killed = subprocess.run(
        [sys.executable, "-c", CHILD, *point], cwd=root, capture_output=True, text=True, timeout=600
    )
    assert killed.returncode == -signal.SIGKILL, f"never reached {point}:\n{killed.stderr[-3000:]}"

    monkeypatch.chdir(root)
    config = Params(register=Register(lineage={"grpo": "data/models/grpo"}, candidate="grpo", baseline=None))
    with tracking.stage_run("register", root=root):
        result = run(config)
    client = mlflow.MlflowClient()
    versions = client.search_model_versions("name='wander-tictactoe'")
    assert [int(v.version) for v in versions] == [1] and result["version"] == 1
    tags = versions[0].tags
    assert tags["wander.promoted"] == "true" and tags["wander.promotion_reason"] == "first registered version"
    assert tags[KEY_TAG] and tags["eval.non_loss"] == f"{result['candidate_non_loss']:.4f}"
    assert int(client.get_model_version_by_alias("wander-tictactoe", "champion").version) == 1
    with tracking.stage_run("register", root=root):
        assert run(config) == result  # and a further rerun changes nothing
    assert len(client.search_model_versions("name='wander-tictactoe'")) == 1
