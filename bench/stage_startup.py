"""Each stage's start-up on the smoke profile, as its own process and through a stage server, in one run (issue 66).

Every stage is its own process (`python -m tasks.<stage>`), and a pipeline of 8 stages pays its start-up 8 times, the
test suite's dozen pipelines about a hundred. Two scratch copies of the code at HEAD (`git archive`, the smoke
profile, MLflow on) run their stages in turn, stage by stage, one copy each way (who goes first alternates, so neither
finds the libraries in the page cache more often):

- `own_process`: `python -m tasks.<stage>`, as DVC runs it;
- `served`: the same command with WANDER_STAGE_SERVER naming a stage server started for the bench
  (tasks/runtime/stage_server.py: the libraries imported once, each stage a fork);
- per stage `wall_s` (command start to exit), `work_s` (the stage's own clock, `done in X s`: its MLflow run and
  `run()`), `startup_s` (the rest: interpreter, imports, the params' load and checks, the exit);
- `served_over_own_process`: the sums' ratios. The server's own start-up (`server_ready_s`) is paid once per server.

`python -m bench.run bench.stage_startup` runs this alone.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from tasks.runtime.stage_server import SERVER_ENV

ROOT = Path(__file__).resolve().parents[1]
STAGES = ["build_model", "generate", "synthesize", "curate", "sft", "grpo", "evaluate", "register"]
PROFILE = "smoke"
DONE = re.compile(r"done in ([\d.]+) s")


def export(commit: str, dest: Path) -> Path:
    """The repository's files at `commit` in `dest`, then a scratch project of them on the smoke profile."""
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
    source = dest / "source"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(source, filter="data")
    project = dest / "project"
    make = f"from pathlib import Path; from tasks.runtime.scratch_copy import copy_project; copy_project(Path({str(project)!r}), profile={PROFILE!r})"
    subprocess.run(
        [sys.executable, "-c", make], cwd=source, env=version_env(source), check=True, capture_output=True
    )
    return project


def version_env(code: Path) -> dict[str, str]:
    """Environment where `code`'s packages come before the installed project's."""
    # As the pipeline runs a stage (tasks.runtime.scratch_copy.project_env): no run ids, byte-compiled code kept.
    dropped = ("MLFLOW_TRACKING_URI", "WANDER_PARENT_RUN_ID", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["PYTHONPATH"] = str(code)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def timed_stage(project: Path, stage: str, server: str | None) -> dict:
    """One stage in `project` (through the stage server at `server`, if given): wall, work and start-up seconds."""
    env = version_env(project)
    if server:
        env[SERVER_ENV] = server
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", f"tasks.{stage}"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0 or "runs itself" in done.stderr:
        raise RuntimeError(f"tasks.{stage} failed or was not served:\n{done.stderr[-3000:]}")
    work = float(DONE.findall(done.stderr)[-1])
    return {"wall_s": round(wall, 2), "work_s": work, "startup_s": round(wall - work, 2)}


def start_server(project: Path, socket: Path) -> tuple[subprocess.Popen, float]:
    """A stage server for `project`'s code, and the seconds it took to be ready."""
    start = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "tasks.runtime.stage_server", str(socket)],
        cwd=project,
        env=version_env(project),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    if not server.stdout.readline().startswith("stage server ready"):
        raise RuntimeError("the stage server did not start")
    return server, round(time.perf_counter() - start, 2)


def run() -> dict:
    """Every stage of the smoke pipeline as its own process and through a stage server, and the ratios."""
    modes = {"own_process": {}, "served": {}}
    with tempfile.TemporaryDirectory(prefix="wander-startup-") as tmp:
        projects = {mode: export("HEAD", Path(tmp) / mode) for mode in modes}
        server, ready = start_server(projects["served"], Path(tmp) / "socket")
        try:
            for i, stage in enumerate(STAGES):
                for mode in sorted(modes, reverse=bool(i % 2)):
                    socket = str(Path(tmp) / "socket") if mode == "served" else None
                    modes[mode][stage] = timed_stage(projects[mode], stage, socket)
        finally:
            server.terminate()
            server.wait(timeout=60)
    own, served = modes["own_process"], modes["served"]
    ratios = {
        key: round(sum(served[s][key] for s in STAGES) / sum(own[s][key] for s in STAGES), 3)
        for key in ("wall_s", "startup_s")
    }
    return {"profile": PROFILE, "server_ready_s": ready, "stages": modes, "served_over_own_process": ratios}
