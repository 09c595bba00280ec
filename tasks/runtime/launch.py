"""A training stage on several processes: its section's `processes` above 1, or an `accelerate_config`.

`python -m tasks.sft` (the command DVC runs) stays the stage's process: it checks the launch
(tasks/params/launch_checks.py, one line each, before anything starts), then runs the stage's processes through
torchrun (`python -m torch.distributed.run --standalone --nproc-per-node N -m tasks.sft ARGS`), or through
accelerate's launcher with the section's accelerate config, and waits. Each of them runs the same stage with RANK and
WORLD_SIZE set: the trainer's torch.distributed (gloo on CPU, NCCL on CUDA), rank 0 writing the outputs and MLflow
(wander/training/processes.py). A stop of the stage (SIGTERM, Ctrl-C, DVC or the flow gone) stops the launcher's
whole process group; the death of one rank makes torchrun end the others and exit non-zero, and so does the stage.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from tasks.params.sections import Params
from wander.core.process_tree import Stopped, start_group, stop_group

STOP_GRACE = 10.0  # seconds the processes get to unwind after a stop, before SIGKILL


def process_index() -> int:
    """This process's rank among the stage's processes (0 when it trains alone), from the launcher's `RANK`."""
    return int(os.environ.get("RANK", "0"))


def is_worker() -> bool:
    """Whether this process is one a launcher started (torchrun, accelerate or DeepSpeed set LOCAL_RANK)."""
    return "LOCAL_RANK" in os.environ


def launcher_command(params: Params, stage: str, argv: Sequence[str]) -> list[str]:
    """The command that starts the stage's processes, each running `python -m tasks.<stage> ARGV`."""
    section = getattr(params, stage)
    module = ["-m", f"tasks.{stage}", *argv]
    if section.accelerate_config is not None:
        launcher = ["-m", "accelerate.commands.launch", "--config_file", section.accelerate_config]
        return [sys.executable, *launcher, "--num_processes", str(section.processes), *module]
    nproc = f"--nproc-per-node={section.processes}"
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", nproc, *module]


def run_processes(params: Params, stage: str, argv: Sequence[str]) -> int:
    """Start the stage's processes and wait for them; a stop stops them all (then raised again); their exit code."""
    # torchrun gives each process one thread unless told; the machine's cores shared out serve CPU training better.
    threads = str(max(1, (os.cpu_count() or 1) // getattr(params, stage).processes))
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", threads)}
    proc = start_group(launcher_command(params, stage, argv), die_with_parent=True, env=env)
    try:
        return proc.wait()
    except Stopped:
        stop_group(proc, grace=STOP_GRACE)
        raise
