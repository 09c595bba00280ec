"""Every environment of tests/flows/conftest.py PIPELINE_ENVS through the whole smoke pipeline (`dvc repro`).

What holds for any environment; an env's own file (e.g. test_pipeline_reverse_text.py) checks what its outputs
mean, on the same run (`smoke_pipeline(name)`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import mlflow
import pytest
import yaml

from flows.pipeline import summary
from tasks.plumbing.scratch_copy import run_in

STAGES = [
    "build_model",
    "generate",
    "synthesize",
    "curate",
    "sft",
    "grpo@wide",
    "grpo@strong",
    "grpo@polish",
    "evaluate",
    "register",
]


@pytest.mark.slow
def test_the_env_runs_every_stage_and_a_second_repro_does_nothing(
    pipeline_env: str, smoke_pipeline: Callable[[str], Path]
) -> None:
    root = smoke_pipeline(pipeline_env)
    lock = yaml.safe_load((root / "dvc.lock").read_text())["stages"]
    assert sorted(lock) == sorted(STAGES)
    for path in (
        "data/datasets/train.jsonl",
        "data/synth/episodes.jsonl",
        "data/sft/train.jsonl",
        "data/models/base/model.safetensors",
        "data/models/sft/model.safetensors",
        "data/models/grpo-wide/model.safetensors",
        "data/models/grpo-strong/model.safetensors",
        "data/models/grpo-polish/model.safetensors",
        "data/eval/report.md",
        "data/eval/matrix.csv",
    ):
        assert (root / path).is_file(), path
    for stage in (
        "build_model",
        "generate",
        "synthesize",
        "curate",
        "sft",
        "grpo-wide",
        "grpo-strong",
        "grpo-polish",
        "register",
    ):
        assert json.loads((root / "data/metrics" / f"{stage}.json").read_text()), stage
    assert json.loads((root / "data/metrics/register.json").read_text())["version"] == 1
    assert yaml.safe_load((root / "params.yaml").read_text())["env"]["name"] == pipeline_env

    # Each stage logged one standalone MLflow run (no pipeline parent: DVC alone) in the project's own store.
    client = mlflow.MlflowClient(f"sqlite:///{root}/mlflow/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("wander").experiment_id])
    names = [r.info.run_name for r in runs]
    assert all(names.count(stage) == 1 for stage in STAGES), names
    assert not any("mlflow.parentRunId" in r.data.tags for r in runs)

    # The run summary the flow prints after `make run` speaks the env's suite (here: its headline per split).
    text = summary(root)
    assert "grpo-polish vs teacher: headline metric" in text and "teacher        reward: all " in text
    # Each stage's headline over every cell: the evaluated rows in training order (teacher last), a number each.
    rows = list(yaml.safe_load((root / "params.yaml").read_text())["evaluate"]["policies"])
    stages = text.split("each stage: ")[1].splitlines()[1 : 1 + len(rows)]
    assert [line.split()[0] for line in stages] == rows and rows[-1] == "teacher"
    assert all(0.0 <= float(line.split()[1]) for line in stages)

    assert "Data and pipelines are up to date." in run_in(root, ["dvc", "repro"])
