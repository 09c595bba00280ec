"""Scheduled retraining: GRPO from the current champion on fresh episode seeds, evaluated, promoted only if better.

Runs outside the DVC graph (like an experiment): every file goes under `<work>/retrain/seed-<seed>/`, the
stages are the pipeline's own (`python -m tasks.<stage> --params <derived params>`), and the register stage
moves the `champion` alias only when the retrained model beats the champion on the same frozen suite.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from prefect import flow, get_run_logger, task

from flows.pipeline import PROJECT, stoppable, stream
from flows.service_check import refuse_when_down

if TYPE_CHECKING:
    from tasks.params.sections import Params

RETRAIN_DIR = "retrain"


@task(name="fetch-champion", retries=2, retry_delay_seconds=5)
def fetch_champion(root: str, model_name: str, alias: str, dest: str) -> str:
    """Copy the champion's checkpoint out of the MLflow registry into `dest`."""
    import mlflow

    from tasks.runtime.tracking import setup

    setup(root)
    local = Path(mlflow.artifacts.download_artifacts(f"models:/{model_name}@{alias}"))
    checkpoints = [p for p in (local / "artifacts").iterdir() if (p / "config.json").exists()]
    if not checkpoints:
        raise FileNotFoundError(
            f"the {alias} of {model_name} holds no checkpoint folder under {local}/artifacts"
        )
    if Path(dest).exists():
        shutil.rmtree(dest)
    shutil.copytree(checkpoints[0], dest)
    return dest


def retrain_params(params: dict, loaded: Params, work: Path, seed: int) -> dict:
    """The pipeline's params (as given, and `loaded`) pointed at the retrain folder: fresh seeds, the curriculum
    from the champion."""
    params = copy.deepcopy(params)
    layout = params["layout"]
    for key in ("datasets", "models", "eval", "metrics", "details", "work"):
        layout[key] = str(work / key)
    params["generate"]["seed"] = seed  # fresh episode seeds: GRPO plays the generated train split
    params["grpo"]["start"] = "champion"
    last = list(loaded.grpo.stage_models(layout["models"]).values())[-1]  # the curriculum's last model
    lineage = {"champion": str(work / "models/champion"), "candidate": last}
    # Every row register's gates read: the candidate, its start model (the champion) and the baseline (the teacher).
    baseline = params["register"].get("baseline")
    policies = loaded.evaluate.policies
    # A baseline that is no policy row is a scripted reference row, which evaluate plays anyway.
    gates = {baseline: policies[baseline]} if baseline in policies else {}
    params["evaluate"].update(policies={**lineage, **gates}, out_dir=layout["eval"], baseline="champion")
    params["register"].update(candidate="candidate", lineage=lineage, eval_dir=layout["eval"])
    return params


@task(name="stage", task_run_name="{name}")
def run_module(name: str, args: list[str], root: str, parent_run_id: str) -> None:
    """One pipeline stage as `python -m tasks.<stage>` on the derived params."""
    stream([sys.executable, "-m", f"tasks.{name}", *args], root, parent_run_id)


@flow(name="wander-retrain")  # its lines through the run logger, as the pipeline's (flows/pipeline.py)
def retrain(root: str = str(PROJECT), seed: int | None = None, model_name: str | None = None) -> dict:
    """Retrain the champion on fresh seeds (default: one per day), evaluate, register; return register's metrics.

    `model_name` null: params.yaml's `register.model_name`, itself null for `wander-<env.name>`."""
    from tasks.params.load import PARAMS_FILE, load_params, read_params
    from tasks.params.yaml_file import yaml_text
    from tasks.runtime.tracking import pipeline_run
    from wander.core.atomic_io import write_text

    seed = seed if seed is not None else datetime.date.today().toordinal()
    given = read_params(Path(root) / PARAMS_FILE)
    params = load_params(Path(root) / PARAMS_FILE, params=given)
    model_name = model_name or params.registered_model_name()
    work = Path(params.layout.work) / RETRAIN_DIR / f"seed-{seed}"
    derived = retrain_params(given, params, work, seed)
    params_file = Path(root) / work / PARAMS_FILE
    write_text(params_file, yaml_text(derived))
    with pipeline_run("retrain", {"seed": seed}, root=root) as run_id:
        fetch_champion(root, model_name, "champion", str(Path(root) / work / "models/champion"))
        run_module("generate", ["--params", str(params_file)], root, run_id)
        run_module("grpo", ["--params", str(params_file)], root, run_id)
        run_module("evaluate", ["--params", str(params_file)], root, run_id)
        run_module("register", ["--params", str(params_file)], root, run_id)
    result = json.loads((Path(root) / work / "metrics/register.json").read_text())
    get_run_logger().info(
        f"retrain seed {seed}: version {result['version']}, promoted={result['promoted']} ({result['reason']})"
    )
    return result


def main(argv: list[str] | None = None) -> int:
    """`python -m flows.retrain [--seed N] [--model-name NAME]`: one retrain, as the scheduled deployment runs it."""
    parser = argparse.ArgumentParser(prog="python -m flows.retrain", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seed", type=int, help="episode seed of the fresh episodes (default: today's ordinal)"
    )
    parser.add_argument(
        "--model-name",
        help="registered model to retrain (default: register.model_name, or wander-<env.name>)",
    )
    args = parser.parse_args(argv)
    if refuse_when_down("python -m flows.retrain", PROJECT):  # before Prefect starts: one line per service
        return 2
    return stoppable(lambda: retrain(seed=args.seed, model_name=args.model_name))


if __name__ == "__main__":
    sys.exit(main())
