"""Each stage's start-up on the smoke profile, for the code at HEAD and at BASELINE, in one run (issue 66).

Every stage is its own process (`python -m tasks.<stage>`), and a pipeline of 8 stages pays its start-up 8 times, the
test suite's dozen pipelines about a hundred. Each version's stages run in turn in a scratch copy of that version
(`git archive`, the smoke profile, MLflow on), each under `python -X importtime`:

- `wall_s`: the stage command, process start to exit;
- `work_s`: the stage's own clock (`done in X s`: its MLflow run and `run()`, lazy imports included);
- `startup_s`: the rest (interpreter, module imports, the params model's load and checks);
- `imports_s`: every import of the process, when it happened, and `by_package` the top ones (cumulative seconds of the
  imports made outside any other import, by top-level package): what a stage pays for a library it may not use.

`-X importtime` itself slows imports a little, equally in both versions; the ratios are HEAD over BASELINE.
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
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The code before issue 66's start-up cuts.
BASELINE = "766b8e6"
STAGES = ["build_model", "generate", "synthesize", "curate", "sft", "grpo", "evaluate", "register"]
PROFILE = "smoke"
TOP_PACKAGES = 8
IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)$")
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


def imports(stderr: str) -> tuple[float, dict[str, float]]:
    """Seconds of all imports in an `-X importtime` log, and those of each top-level package."""
    by_package: Counter[str] = Counter()
    for line in stderr.splitlines():
        found = IMPORT_LINE.match(line)
        if found and not found.group(3):  # an import made by code, not by another import
            by_package[found.group(4).split(".")[0]] += int(found.group(2)) / 1e6
    return sum(by_package.values()), dict(by_package)


def timed_stage(project: Path, stage: str) -> dict:
    """One stage under `-X importtime` in `project`: wall, work, start-up and import seconds."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", f"tasks.{stage}"],
        cwd=project,
        env=version_env(project),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"tasks.{stage} failed:\n{done.stderr[-3000:]}")
    work = float(DONE.findall(done.stderr)[-1])
    total, by_package = imports(done.stderr)
    top = dict(sorted(by_package.items(), key=lambda kv: -kv[1])[:TOP_PACKAGES])
    return {
        "wall_s": round(wall, 2),
        "work_s": work,
        "startup_s": round(wall - work, 2),
        "imports_s": round(total, 2),
        "by_package": {name: round(s, 2) for name, s in top.items()},
    }


def run() -> dict:
    """Every stage of the smoke pipeline at BASELINE and at HEAD, and the ratios."""
    versions = {}
    with tempfile.TemporaryDirectory(prefix="wander-startup-") as tmp:
        for name, commit in (("baseline", BASELINE), ("head", "HEAD")):
            project = export(commit, Path(tmp) / name)
            versions[name] = {stage: timed_stage(project, stage) for stage in STAGES}
    base, head = versions["baseline"], versions["head"]
    ratios = {
        key: round(sum(head[s][key] for s in STAGES) / sum(base[s][key] for s in STAGES), 3)
        for key in ("wall_s", "startup_s", "imports_s")
    }
    return {"baseline": BASELINE, "profile": PROFILE, "stages": versions, "head_over_baseline": ratios}
