"""A scratch copy of the project: the pipeline's code and config in a fresh git repo, optionally a profile.

Used to try a profile without touching the real params.yaml (`params.<profile>.yaml` merged in), by the
end-to-end tests and by the pipeline benchmark.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
FILES = [
    "wander",
    "envs",
    "tasks",
    "flows",
    "services",
    "configs",
    "dvc.yaml",
    "params.yaml",
    "prefect.yaml",
    ".dvcignore",
    ".gitignore",
    ".dvc/config",
    ".dvc/.gitignore",
]


def project_env(root: Path) -> dict[str, str]:
    """Environment for commands in the copy: our Python first on PATH, a private Prefect home, no run ids."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env["PREFECT_HOME"] = str(root / ".prefect")
    # Prefect waits 20 s for its ephemeral API by default; on two busy cores its start-up took longer.
    env.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    # Bytecode written into code deps (as on any machine without PYTHONDONTWRITEBYTECODE) must not rerun stages.
    for key in (
        "MLFLOW_TRACKING_URI",
        "MLFLOW_RUN_ID",
        "WANDER_PARENT_RUN_ID",
        "PREFECT_API_URL",
        "PYTHONDONTWRITEBYTECODE",
    ):
        env.pop(key, None)
    return env


def run_in(root: Path, args: list[str], timeout: float = 3600) -> str:
    """Run a command in the copy; raise with its output's tail when it fails; return stdout and stderr."""
    done = subprocess.run(
        args, cwd=root, env=project_env(root), capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done.stdout + done.stderr


def copy_project(root: Path, profile: str | None = None) -> Path:
    """Copy the pipeline into `root` (a new git repo), with `params.<profile>.yaml` merged when given."""
    profiles = [
        p.name for p in sorted(PROJECT.glob("params.*.yaml"))
    ]  # every profile (one may extend another)
    for name in FILES + profiles:
        src, dst = PROJECT / name, root / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)
    if profile:
        run_in(
            root,
            [sys.executable, "-m", "tasks.params.load", "--profile", profile, "--write", "params.yaml"],
        )
    run_in(root, ["git", "init", "-q"])
    run_in(root, ["git", "add", "-A"])
    run_in(
        root, ["git", "-c", "user.name=wander", "-c", "user.email=wander@localhost", "commit", "-qm", "copy"]
    )
    return root
