"""A killed GRPO or SFT run restarts from its last checkpoint and ends where an uninterrupted run does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

JOB = Path(__file__).with_name("resume_job.py")
ROOT = Path(__file__).parents[3]


def start(kind: str, model: str, out: Path, hang_after: int | None = None) -> subprocess.Popen:
    cmd = [sys.executable, str(JOB), kind, model, str(out)]
    if hang_after is not None:
        cmd += ["--hang-after", str(hang_after)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out.mkdir(parents=True, exist_ok=True)
    log = open(out.parent / f"{out.name}.log", "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)


def finish(process: subprocess.Popen, out: Path) -> dict:
    assert process.wait(timeout=600) == 0, (out.parent / f"{out.name}.log").read_text()[-3000:]
    return json.loads((out / "result.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["grpo", "sft"])
def test_killed_run_resumes_from_its_last_checkpoint_with_the_same_result(
    kind, sft_model, tiny_model, tmp_path
):
    model = sft_model if kind == "grpo" else tiny_model  # GRPO needs a model whose groups differ in reward
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    uninterrupted = start(kind, model, whole)
    doomed = start(kind, model, killed, hang_after=2)
    deadline = time.monotonic() + 600
    while not (killed / "hung").exists():
        assert doomed.poll() is None, (tmp_path / "killed.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "the run never reached its checkpoint"
        time.sleep(0.5)
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.wait()
    assert (killed / "checkpoint-2").is_dir() and not (killed / "final.pt").exists()

    resumed = finish(start(kind, model, killed), killed)
    assert resumed == {"resumed_from": str(killed / "checkpoint-2"), "global_step": 4}
    assert finish(uninterrupted, whole) == {"resumed_from": None, "global_step": 4}

    a, b = torch.load(whole / "final.pt"), torch.load(killed / "final.pt")
    at_checkpoint = load_file(killed / "checkpoint-2" / "model.safetensors")
    assert any(not torch.allclose(at_checkpoint[k], b[k]) for k in at_checkpoint)  # steps 3-4 did train
    for name, value in a.items():
        torch.testing.assert_close(b[name], value, rtol=1e-4, atol=1e-5, msg=name)
