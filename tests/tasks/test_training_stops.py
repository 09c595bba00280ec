"""A training stage stopped during its final save resumes from its last checkpoint, never from step 0, and leaves no
model-sized temporaries; the checkpoints go only once the model is saved (real stage processes, smoke params)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from wander.core.atomic_io import TEMP_NAME
from wander.training.checkpoints import CHECKPOINT, is_complete

from .conftest import REPO, write_params

# The stage as `python -m tasks.grpo` runs it, except that a SIGTERM arrives once the model is written into the
# save's temporary folder, before that folder is renamed into place: the stop lands inside the final save.
STOPPED_IN_SAVE = """
import os, signal, sys, time
import wander.training.lora as lora
save_trained = lora.save_trained
def save_then_stop(trainer, out):
    save_trained(trainer, out)
    print("saved into", out, file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)  # the stop unwinds from here
lora.save_trained = save_then_stop
from tasks.grpo import main
sys.exit(main(sys.argv[1:]))
"""


def run_stage(params: Path, *code: str) -> subprocess.CompletedProcess:
    """`python -m tasks.grpo` (or `code` with the same arguments) on `params`, without MLflow."""
    cmd = [sys.executable, *(["-c", *code] if code else ["-m", "tasks.grpo"])]
    args = ["--params", str(params), "--no-mlflow"]
    return subprocess.run(cmd + args, cwd=REPO, capture_output=True, text=True, timeout=600)


def checkpoints_of(work: Path) -> list[Path]:
    """Every checkpoint folder under the GRPO work folder."""
    return sorted(p for p in work.rglob("checkpoint-*") if CHECKPOINT.match(p.name))


@pytest.mark.slow
def test_a_stage_stopped_during_its_final_save_resumes_from_its_last_checkpoint(
    tmp_path: Path, params_at, base_model: Path, generated: dict, shared_params: dict
) -> None:
    params = params_at(tmp_path)
    layout = {k: Path(v) for k, v in params["layout"].items()}
    shutil.copytree(base_model, layout["models"] / "base")
    shutil.copytree(shared_params["layout"]["datasets"], layout["datasets"])
    params["grpo"].update(start="base", stages={"wide": {"max_steps": 2}})
    params["grpo"].update(save_steps=1, curve_every=1, keep_best=True)
    path = write_params(tmp_path / "params.yaml", params)
    out = layout["models"] / "grpo/wide"

    stopped = run_stage(path, STOPPED_IN_SAVE)
    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stderr[-3000:]
    assert "saved into" in stopped.stderr and "stopped by SIGTERM" in stopped.stderr
    assert not out.exists() and not [p for p in out.parent.iterdir() if TEMP_NAME.fullmatch(p.name)]
    [kept] = checkpoints_of(layout["work"] / "grpo")  # the last one, whole: what the rerun must resume
    assert kept.name == "checkpoint-2" and is_complete(kept)
    assert (kept.parent / "curve_best" / "best.json").is_file()

    # A killed save's temporary (SIGKILL leaves it; SIGTERM unwinds it) is cleared as the stage starts.
    leftover = out.parent / f".wide.tmp-{2**22 + 1}-0123abcd"
    leftover.mkdir()
    (leftover / "model.safetensors").write_bytes(b"\0" * 1024)

    resumed = run_stage(path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {kept}" in resumed.stderr  # not from step 0
    assert not leftover.exists()
    assert (out / "model.safetensors").is_file() and (out / "curve.json").is_file()
    assert json.loads((layout["metrics"] / "grpo.json").read_text())["grpo-wide"]["steps"] == 2
    assert not checkpoints_of(layout["work"] / "grpo")  # saved: nothing left to resume
    assert not [p for p in out.parent.iterdir() if TEMP_NAME.fullmatch(p.name)]
