"""The pipeline flow: one parent MLflow run, each DVC stage a Prefect task.

DVC owns the DAG and the cache (`dvc repro --single-item <stage>` reruns a stage only when its
deps or params changed); Prefect adds runs, retries, logs and schedules; MLflow nests every
stage's run under this flow's parent run through WANDER_PARENT_RUN_ID.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

from prefect import flow, get_run_logger, task

# Stages that talk to the outside world (a teacher API) get retries; the rest fail fast.
RETRIES = {"synthesize": 2}
PROJECT = Path(__file__).resolve().parent.parent


class StageFailed(RuntimeError):
    """A DVC stage exited non-zero; the message carries the end of its output."""


def dvc_stages(root: Path) -> list[str]:
    """Stage names in dvc.yaml order (foreach stages expanded), which is their run order."""
    out = subprocess.run(
        ["dvc", "stage", "list", "--name-only"], cwd=root, capture_output=True, text=True, check=True
    )
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def stage_env(parent_run_id: str | None) -> dict[str, str]:
    """The stage process environment: the project's Python first on PATH, the parent run id."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if parent_run_id:
        env["WANDER_PARENT_RUN_ID"] = parent_run_id
    return env


@task(name="dvc-stage", task_run_name="{stage}")
def run_stage(stage: str, root: str, parent_run_id: str | None, force: bool = False) -> dict:
    """`dvc repro --single-item <stage>`, streaming its output into the Prefect log."""
    logger = get_run_logger()
    cmd = ["dvc", "repro", "--single-item", stage] + (["--force"] if force else [])
    start = time.monotonic()
    tail: deque[str] = deque(maxlen=40)
    with subprocess.Popen(
        cmd,
        cwd=root,
        env=stage_env(parent_run_id),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    ) as proc:
        for line in proc.stdout:
            line = line.rstrip()
            tail.append(line)
            logger.info(line)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise StageFailed(f"stage {stage} failed (exit {proc.returncode}):\n" + "\n".join(tail))
    skipped = any("didn't change, skipping" in line or "is cached" in line for line in tail)
    return {"stage": stage, "seconds": seconds, "skipped": skipped}


@flow(name="wander-pipeline", log_prints=True)
def pipeline(
    root: str = str(PROJECT),
    stages: list[str] | None = None,
    force: bool = False,
    experiment: str | None = None,
) -> list[dict]:
    """Run the DVC stages in order under one parent MLflow run; a failed stage fails the flow."""
    from tasks.tracking import pipeline_run

    names = stages or dvc_stages(Path(root))
    results = []
    with pipeline_run("pipeline", {"stages": ",".join(names)}, root=root, experiment=experiment) as run_id:
        for name in names:
            retried = run_stage.with_options(
                retries=RETRIES.get(name.split("@")[0], 0), retry_delay_seconds=5
            )
            results.append(retried(name, root, run_id, force))
    return results


if __name__ == "__main__":
    pipeline()
