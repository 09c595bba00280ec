"""`dvc repro curate` (the data stages) on a scratch copy of the repo (smoke profile): runs, then does nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mlflow
import pytest
import yaml

from tasks.runtime.scratch_copy import copy_project, run_in

STAGES = ["build_model", "generate", "synthesize", "curate"]


def sh(args: list[str], cwd: Path) -> str:
    """A command in the scratch project (our Python first on PATH); its output."""
    return run_in(cwd, args)


def ran(output: str) -> list[str]:
    """Stages DVC ran, in order."""
    return [s for line in output.splitlines() for s in STAGES if line.startswith(f"Running stage '{s}'")]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repo holding the pipeline's files, with the smoke profile written into params.yaml."""
    return copy_project(tmp_path_factory.mktemp("repo"), profile="smoke")


@pytest.mark.slow
def test_repro_runs_the_data_stages_then_does_nothing(repo: Path) -> None:
    first = sh(["dvc", "repro", "curate"], repo)
    assert sorted(ran(first)) == sorted(STAGES) and ran(first)[-1] == "curate"  # DVC picks the order
    for path in (
        "data/models/base/model.safetensors",
        "data/datasets/train.jsonl",
        "data/synth/episodes.jsonl",
        "data/sft/train.jsonl",
    ):
        assert (repo / path).exists(), path
    for stage in STAGES:
        assert json.loads((repo / "data" / "metrics" / f"{stage}.json").read_text())
    for stage in ("generate", "synthesize", "curate"):  # the breakdown behind each headline
        assert json.loads((repo / "data" / "details" / f"{stage}.json").read_text())
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    assert sorted(lock["stages"]) == sorted(STAGES)
    assert lock["stages"]["generate"]["params"]["params.yaml"]["generate"]["num_train"] == 48

    # Every stage logged a standalone MLflow run in the repo's own store.
    client = mlflow.MlflowClient(f"sqlite:///{repo}/mlflow/mlflow.db")
    experiment = client.get_experiment_by_name("wander")
    names = sorted(r.info.run_name for r in client.search_runs([experiment.experiment_id]))
    assert names == sorted(STAGES)

    assert list((repo / "envs" / "tictactoe").glob("__pycache__/*.pyc"))  # written while stages ran
    mtimes = {p: p.stat().st_mtime_ns for p in (repo / "data").rglob("*") if p.is_file()}
    second = sh(["dvc", "repro", "curate"], repo)
    assert ran(second) == [] and "Data and pipelines are up to date." in second
    assert {p: p.stat().st_mtime_ns for p in (repo / "data").rglob("*") if p.is_file()} == mtimes
    assert "up to date" in sh(["dvc", "status", "--with-deps", "curate"], repo)


@pytest.mark.slow
def test_a_curate_param_reruns_only_curate_and_the_remote_round_trips(repo: Path) -> None:
    if not (repo / "dvc.lock").exists():
        sh(["dvc", "repro", "curate"], repo)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["curate"]["eval_fraction"] = 0.2
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert ran(sh(["dvc", "repro", "curate"], repo)) == ["curate"]

    # The default remote is a folder in the repo: push, lose the data and the cache, pull it all back.
    sh(["dvc", "push", "--with-deps", "curate"], repo)
    assert (repo / ".dvc-remote").is_dir()
    train = (repo / "data" / "sft" / "train.jsonl").read_bytes()
    shutil.rmtree(repo / "data")
    shutil.rmtree(repo / ".dvc" / "cache")
    sh(["dvc", "pull", "--with-deps", "curate"], repo)
    assert (repo / "data" / "sft" / "train.jsonl").read_bytes() == train
    assert ran(sh(["dvc", "repro", "curate"], repo)) == []
