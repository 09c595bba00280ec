"""SFT rows/s and GRPO s/step of the stages on 1 and 2 processes (torchrun, DDP over gloo), timed in one run here.

The model is the default profile's scratch model (params.yaml's `build_model.scratch`: 4 layers of 128), the data the
smoke profile's (its teacher games, curated); the global batch is the same on both (SFT 8 rows = 1 x 8 = 2 x 4, GRPO
16 samples a step). The stages' own clocks time the training (`seconds` in their metrics: no process start, no
model load); `wall_s` is the whole stage command. On 2 cores, two processes of one thread each do the work one
process does with two threads, plus a gradient all-reduce per step: no gain is expected here; the ratios say what
the processes cost (docs/training.md#several-processes-and-gpus says what N GPUs give).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from tasks import build_model, curate, generate, synthesize
from tasks.params.load import PARAMS_FILE, load_params, read_params, restrict

ROOT = Path(__file__).resolve().parents[1]
SFT_EPOCHS = 3  # passes over the smoke profile's curated rows (a few seconds each)
GRPO_STEPS = 6  # optimizer steps of the one curriculum stage timed


def prepared(root: Path) -> dict:
    """Smoke params under `root` with the default scratch model, its data made up to the curated SFT rows."""
    params = read_params(PARAMS_FILE, profile="smoke")
    params["build_model"]["scratch"] = read_params(PARAMS_FILE)["build_model"]["scratch"]
    params["layout"] = {key: str(root / value) for key, value in params["layout"].items()}
    for stage in (build_model, generate, synthesize, curate):
        name = stage.__name__.rsplit(".", 1)[1]
        stage.run(restrict(load_params(params=params), name))
    params["sft"]["num_train_epochs"] = SFT_EPOCHS
    params["grpo"].update(stages={"timed": {}}, max_steps=GRPO_STEPS, curve_every=0, keep_best=False)
    return params


def timed_stage(root: Path, params: dict, stage: str, processes: int) -> dict:
    """Run `python -m tasks.<stage>` on `processes` processes; its metrics and the command's wall time."""
    params = json.loads(json.dumps(params))
    section = params[stage]
    section["processes"] = processes
    if stage == "sft":
        section["per_device_train_batch_size"] = 8 // processes
    path = root / f"params-{stage}-{processes}.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMP_NUM_THREADS")
    }
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", f"tasks.{stage}", "--params", str(path), "--no-mlflow"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=1800,
    )
    wall = time.perf_counter() - start
    metrics = json.loads((Path(params["layout"]["metrics"]) / f"{stage}.json").read_text())
    return {"metrics": metrics, "wall_s": round(wall, 1)}


def run() -> dict:
    """Time SFT and GRPO on 1 and 2 processes; ratios of 2 to 1."""
    with tempfile.TemporaryDirectory(prefix="wander-processes-") as tmp:
        root = Path(tmp)
        params = prepared(root)
        out: dict = {"cpus": os.cpu_count()}
        for n in (1, 2):
            sft = timed_stage(root, params, "sft", n)["metrics"]
            out[f"sft_{n}"] = {
                "rows_per_s": round(sft["examples"] * SFT_EPOCHS / sft["seconds"], 1),
                "steps": sft["steps"],
                "seconds": sft["seconds"],
            }
            params["grpo"]["start"] = "sft"
            grpo = timed_stage(root, params, "grpo", n)
            timed = grpo["metrics"]["grpo-timed"]
            out[f"grpo_{n}"] = {
                "seconds_per_step": timed["seconds_per_step"],
                "steps": timed["steps"],
                "wall_s": grpo["wall_s"],
            }
        out["sft_rows_per_s_2_over_1"] = round(out["sft_2"]["rows_per_s"] / out["sft_1"]["rows_per_s"], 2)
        out["grpo_s_per_step_2_over_1"] = round(
            out["grpo_2"]["seconds_per_step"] / out["grpo_1"]["seconds_per_step"], 2
        )
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
