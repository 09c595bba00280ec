"""Every environment of tests/flows/conftest.py PIPELINE_ENVS through the whole smoke pipeline (`dvc repro`).

What holds for any environment; an env's own file (e.g. test_pipeline_reverse_text.py) checks what its outputs
mean, on the same run (`smoke_pipeline(name)`).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import mlflow
import pytest
import yaml

from flows.pipeline import summary
from tasks.params.recipe import recipe_of
from tasks.runtime.scratch_copy import run_in
from wander import load_environment
from wander.core.atomic_io import read_jsonl
from wander.core.evaluation_suite import MATRIX

from .smoke_outputs import lineage, run_params

STAGES = [
    "build_model",
    "generate",
    "synthesize",
    "curate",
    "sft",
    "grpo",
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
        "grpo",
        "register",
    ):
        assert json.loads((root / "data/metrics" / f"{stage}.json").read_text()), stage
    models = lineage(root)
    grpo_models = {k: v for k, v in models.items() if k.startswith("grpo-")}
    assert grpo_models and all(
        (root / folder / "model.safetensors").is_file() for folder in grpo_models.values()
    )
    # The env's own curriculum: its recipe's stages (tic-tac-toe's three, chess's two, one elsewhere).
    assert len(grpo_models) == len(recipe_of(pipeline_env)[1]["grpo.stages"]), grpo_models
    assert json.loads((root / "data/metrics/register.json").read_text())["version"] == 1
    assert yaml.safe_load((root / "params.yaml").read_text())["env"]["name"] == pipeline_env

    # Each stage logged one standalone MLflow run (no pipeline parent: DVC alone) in the project's own store.
    client = mlflow.MlflowClient(f"sqlite:///{root}/mlflow/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("wander").experiment_id])
    names = [r.info.run_name for r in runs]
    parts = [f"grpo@{name.removeprefix('grpo-')}" for name in grpo_models]  # one run per curriculum stage
    assert all(names.count(stage) == 1 for stage in [*STAGES, *parts] if stage != "grpo"), names
    assert not any("mlflow.parentRunId" in r.data.tags for r in runs)

    # The run summary the flow prints after `make run` speaks the env's suite (here: its headline per split).
    text = summary(root)
    suite = load_environment(
        pipeline_env, **(run_params(root)["env"].get(pipeline_env) or {})
    ).evaluation_suite()
    if suite.kind == MATRIX:  # a game's opponents, its outcomes per opponent (chess)
        assert f"{list(models)[-1]} vs teacher: {' / '.join(suite.report.outcomes)} per opponent" in text
    else:
        assert (
            f"{list(models)[-1]} vs teacher: headline metric" in text
            and "teacher        reward: all " in text
        )
    # Each stage's headline over every cell: the evaluated rows in training order (teacher last), a number each.
    rows = [*models, "teacher"]
    stages = text.split("each stage: ")[1].splitlines()[1 : 1 + len(rows)]
    assert [line.split()[0] for line in stages] == rows and rows[-1] == "teacher"
    assert all(0.0 <= float(line.split()[1]) for line in stages)
    # Each stage's precision as its key resolves here (params.yaml keeps the scratch recipe in float32).
    assert "precision: sft fp32, grpo fp32, evaluate fp32 (null = detected: this machine " in text

    assert "Data and pipelines are up to date." in run_in(root, ["dvc", "repro"])


@pytest.mark.slow
def test_each_stage_of_the_env_reports_numbers_that_add_up(
    rubric_env: str, smoke_pipeline: Callable[[str], Path]
) -> None:
    root = smoke_pipeline(rubric_env)
    params = yaml.safe_load((root / "params.yaml").read_text())

    def metrics(stage: str, kind: str = "metrics") -> dict:
        return json.loads((root / "data" / kind / f"{stage}.json").read_text())

    # The embedded teacher is competent but imperfect (each env's slip rate), and never breaks the protocol.
    synth = metrics("synthesize")
    assert synth["episodes"] == params["generate"]["num_train"] and synth["teacher_invalid"] == 0.0
    assert 0.5 < synth["teacher_reward"] < 1.0, synth

    # Curation: every input game is kept or dropped by exactly one filter; the env's floors removed the teacher's
    # slips, so each floor metric of what is kept is perfect; what is written is what is counted.
    curate = metrics("curate", "details")
    floors = load_environment(rubric_env).curation_defaults()["min_values"]
    assert curate["input"] == synth["episodes"] == curate["kept"] + sum(curate["dropped"].values())
    assert sum(curate["per_stratum"].values()) == curate["kept"] == curate["train"] + curate["eval"]
    assert sum(curate["dropped"][name] for name in floors) > 0
    assert all(curate[name]["kept"] == 1.0 >= curate[name]["input"] for name in floors)
    written = {split: len(read_jsonl(root / f"data/sft/{split}.jsonl")) for split in ("train", "eval")}
    assert written == {"train": curate["train"] + curate["copies"], "eval": curate["eval"]}

    # Training: SFT saw every written row; each GRPO stage ran its steps and kept one of its curve points.
    sft = metrics("sft")
    assert sft["examples"] == written["train"] and sft["steps"] > 0 and 0 < sft["train_loss"] < 100
    for grpo in metrics("grpo").values():  # one headline per curriculum stage
        assert grpo["steps"] == params["grpo"]["max_steps"] and 0 <= grpo["kept_step"] <= grpo["steps"], grpo
        assert 0.0 <= grpo["final_reward"] <= 1.0 and grpo["seconds_per_step"] > 0, grpo

    # Evaluation: rows for every policy, every cell played without error, each mean inside its interval inside [0, 1];
    # the teacher's headline is the mean of its cells, and on the held-out problems of the kind it was built for (the
    # eval side) it is competent; on another side it may score 0 by design (coding's teacher gives up on HumanEval).
    with (root / "data/eval/matrix.csv").open() as f:
        cells = list(csv.DictReader(f))
    rows = [*lineage(root), "teacher"]  # params.yaml's null rows: the lineage and the teacher
    assert set(rows) <= {c["policy"] for c in cells}  # then the env's references
    for c in cells:
        low, mean, high = (float(c[k]) for k in ("reward_ci_low", "reward", "reward_ci_high"))
        assert int(c["games"]) > 0 and int(c["errored"]) == 0 and 0.0 <= low <= mean <= high <= 1.0, c
    teacher = [float(c["reward"]) for c in cells if c["policy"] == "teacher"]
    headline = json.loads((root / "data/eval/metrics.json").read_text())["teacher"]["reward"]["all"]
    own = [float(c["reward"]) for c in cells if c["policy"] == "teacher" and c["side"] == "eval"]
    assert headline == pytest.approx(sum(teacher) / len(teacher), abs=1e-3) and sum(own) / len(own) > 0.5
