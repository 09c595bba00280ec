"""Pipeline wall time per stage, orchestration overhead, GRPO seconds per step, and no-op `dvc repro` time.

Runs the Prefect flow on a scratch copy of the project (default profile, or WANDER_BENCH_PROFILE=smoke).
Stage compute is the duration of each stage's nested MLflow run (it wraps the stage's `run(config)`);
overhead is the flow's wall time outside them (Prefect, DVC, process start-up and imports), as a
fraction of the wall time; target under 10%; and per stage, its task's wall (Prefect's task run) minus its compute. The run's learning table (`bench.learning`) is recorded too. GRPO seconds per step (64 episodes with the default params) come
from each stage's metrics file; target 1.5 s on 2 cores.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from bench.learning import learning_table
from flows.pipeline import summary
from tasks.runtime.scratch_copy import copy_project, run_in


def stage_seconds(root: Path) -> dict[str, float]:
    """Duration of every stage run nested under the pipeline run, from the project's MLflow store."""
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow/mlflow.db'}")
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    return {
        r.info.run_name: round((r.info.end_time - r.info.start_time) / 1000, 2)
        for r in runs
        if r.data.tags.get("wander.kind") == "stage" and r.info.end_time
    }


def stage_walls(root: Path) -> dict[str, float]:
    """Each stage task's wall seconds in the newest flow run (`dvc repro` of it: processes, imports, DVC's hashing and
    the stage's work), from the scratch project's Prefect database."""
    import contextlib
    import sqlite3
    from datetime import datetime

    with contextlib.closing(sqlite3.connect(root / ".prefect/prefect.db")) as db:
        (flow_id,) = db.execute("select id from flow_run order by created desc limit 1").fetchone()
        rows = db.execute("select name, start_time, end_time from task_run where flow_run_id = ?", (flow_id,))
        return {
            name: round((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds(), 2)
            for name, start, end in rows
            if start and end
        }


def stage_overheads(walls: dict[str, float], compute: dict[str, float]) -> dict[str, float]:
    """Each stage's wall minus its own work (its MLflow runs: grpo's one per curriculum stage)."""
    return {
        stage: round(wall - sum(s for run, s in compute.items() if run.split("@")[0] == stage), 2)
        for stage, wall in walls.items()
    }


def grpo_seconds_per_step(root: Path) -> dict[str, float]:
    """Each GRPO stage's seconds per optimizer step (`grpo.batch_size` episodes), from its DVC metrics file."""
    return {
        path.stem: json.loads(path.read_text())["seconds_per_step"]
        for path in sorted((root / "data/metrics").glob("grpo-*.json"))
    }


def run() -> dict:
    """Time the whole flow, each stage, and a second (no-op) `dvc repro`."""
    profile = os.environ.get("WANDER_BENCH_PROFILE") or None
    with tempfile.TemporaryDirectory(prefix="wander-bench-") as tmp:
        root = copy_project(Path(tmp), profile=profile)
        start = time.perf_counter()
        run_in(root, [sys.executable, "-m", "flows.pipeline"], timeout=3 * 3600)
        wall = time.perf_counter() - start
        stages = stage_seconds(root)
        walls = stage_walls(root)
        grpo_steps = grpo_seconds_per_step(root)
        result = summary(root).strip().splitlines()  # what the run achieved, kept beside how long it took
        learning = learning_table(root)
        start = time.perf_counter()
        noop = run_in(root, ["dvc", "repro"])
        noop_s = time.perf_counter() - start
    compute = sum(stages.values())
    return {
        "profile": profile or "default",
        "flow_wall_s": round(wall, 1),
        "stage_compute_s": stages,
        "orchestration_overhead_fraction": round(1 - compute / wall, 3),
        "stage_wall_s": walls,
        "stage_overhead_s": stage_overheads(walls, stages),
        "target_overhead_fraction": 0.10,
        "noop_repro_s": round(noop_s, 2),
        "noop_repro_did_nothing": "Data and pipelines are up to date." in noop,
        "target_noop_repro_s": 5.0,
        "grpo_seconds_per_step": grpo_steps,
        "target_grpo_seconds_per_step": 1.5,
        "summary": result,
        "learning": learning,
    }
