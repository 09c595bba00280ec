"""The replica check on real processes (torchrun, gloo): identical weights pass, a rank whose weights moved outside
the optimizer stops training with the step named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from wander.training.processes import process_seed

REPO = Path(__file__).resolve().parents[3]

# Each rank: a real Accelerator (gloo), a small model, the check after "step 3"; rank 1 nudges one weight first when
# told to, as a rank that loaded other weights would differ.
WORKER = """
import os, sys, types, torch
from accelerate import Accelerator
from wander.training.processes import ReplicaCheck
accelerator = Accelerator(cpu=True)
torch.manual_seed(0)
model = torch.nn.Linear(4, 3)
if sys.argv[1] == "diverge" and accelerator.process_index == 1:
    with torch.no_grad():
        model.weight[0, 0] += 1e-6
trainer = types.SimpleNamespace(accelerator=accelerator, model=model)
check = ReplicaCheck(trainer)
try:
    check.on_step_end(None, types.SimpleNamespace(global_step=3), None)
    said = f"same after {check.steps} check"
except RuntimeError as e:
    said = str(e)
with open(f"{sys.argv[2]}/rank{accelerator.process_index}.txt", "w") as out:  # one file each: no interleaving
    out.write(said)
"""


@pytest.mark.parametrize("mode", ["same", "diverge"])
def test_the_replica_check_passes_identical_weights_and_names_the_step_where_they_differ(tmp_path, mode):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node=2",
            str(script),
            mode,
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    said = [(tmp_path / f"rank{rank}.txt").read_text() for rank in (0, 1)]
    if mode == "same":
        assert said == ["same after 1 check"] * 2
    else:
        differ = "the training processes' weights differ after optimizer step 3"
        assert all(line.startswith(differ) for line in said), said


def test_rank_zero_keeps_the_runs_seed_and_the_other_ranks_get_their_own():
    seeds = [process_seed(5, rank) for rank in range(4)]
    assert seeds[0] == 5 and len(set(seeds)) == 4
    assert not set(seeds) & {process_seed(6, rank) for rank in range(4)}  # nearby runs share no seed
