"""The smoke pipeline embedded against the same pipeline on the team's services, timed in one run on this machine.

Embedded: `python -m flows.pipeline` in a scratch copy (sqlite MLflow, Prefect's ephemeral API, DVC's cache in the
copy). On the services: PostgreSQL, S3, MLflow and Prefect servers on loopback (`python -m services up` on free
ports), a bare repository, a `cpu` and a `gpu` worker each in a folder of its own, and `prefect deployment run
'wander-team/team' --watch`: every stage a flow run that clones, pulls, runs, pushes (flows/team.py). The ratio is the
price of sharing everything through servers; the services' start is timed apart (a team starts them once).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from services.local_team import WORKER_ENV, Team, make_team
from services.settings import CREDENTIALS, DVC_BUCKET, Settings
from tasks.runtime.scratch_copy import copy_project, run_in

PROFILE = "smoke"
RUN_SECONDS = 1800


def services_cli(command: str, env: dict[str, str]) -> float:
    """`python -m services COMMAND`; its seconds."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "services", command], env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def embedded_seconds(root: Path) -> float:
    """Wall time of the embedded pipeline in a scratch copy at `root`."""
    copy_project(root, PROFILE)
    start = time.perf_counter()
    run_in(root, [sys.executable, "-m", "flows.pipeline"], timeout=RUN_SECONDS)
    return time.perf_counter() - start


def team_seconds(team: Team) -> float:
    """Wall time of `prefect deployment run 'wander-team/team' --watch` with a cpu and a gpu worker."""
    source = team.machine("source")
    make_team(team, copy_project(source, PROFILE))
    team.start_worker("cpu-worker", "cpu")
    team.start_worker("gpu-worker", "gpu")
    try:
        start = time.perf_counter()
        team.run(["prefect", "deployment", "run", "wander-team/team", "--watch"], source, timeout=RUN_SECONDS)
        return time.perf_counter() - start
    finally:
        team.stop_workers()


def run() -> dict:
    """Time both, and the services' first start."""
    with tempfile.TemporaryDirectory(prefix="wander-bench-team-") as tmp:
        folder = Path(tmp)
        embedded = embedded_seconds(folder / "embedded")
        # Not in tmp's 0700 folder alone: PostgreSQL's system user must reach its data folder.
        services_dir = Path(tempfile.mkdtemp(prefix="wander-bench-services-"))
        settings = Settings.on_free_ports(services_dir)
        own = {name for name, _ in CREDENTIALS.values()}
        env = {key: value for key, value in os.environ.items() if key not in own} | settings.env()
        try:
            start_s = services_cli("up", env)
            on_services = team_seconds(Team(folder / "team", settings, env, f"s3://{DVC_BUCKET}/bench"))
        finally:
            services_cli("down", env)
            subprocess.run(["rm", "-rf", str(services_dir)], check=False)
    return {
        "profile": PROFILE,
        "embedded_s": round(embedded, 1),
        "team_s": round(on_services, 1),
        "team_over_embedded": round(on_services / embedded, 2),
        "services_first_start_s": round(start_s, 1),
        "workers": {"cpu-worker": "cpu", "gpu-worker": "gpu"},
        "worker_poll_s": float(WORKER_ENV["PREFECT_WORKER_QUERY_SECONDS"]),  # Prefect's default: 10
    }
