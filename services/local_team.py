"""A team's machines on one host, for the tests and the benchmark: a bare repository (the team's git server), Prefect
work pools and the team deployments of prefect.yaml, and workers each in a folder of its own, sharing nothing but the
services (`python -m services up`); what the workers did, read back from the Prefect server."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from services.settings import CREDENTIALS, Settings
from services.stack import client_env
from wander.core.process_tree import descendants

VENV_BIN = str(Path(sys.executable).parent)
TEAM_DEPLOYMENTS = ("team", "cpu", "gpu", "retrain-team")
# Workers ask for work every 2 s (Prefect's default, 10 s, would add minutes over a run's nine flow runs).
# A flow run of a killed worker is Crashed after a minute without heartbeats (two missed beats; 90 s by default).
LOST_AFTER_SECONDS = 60
WORKER_ENV = {"PREFECT_WORKER_QUERY_SECONDS": "2", "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": "30"}


@dataclasses.dataclass
class Team:
    """The repository a team clones, the environment every machine gets (the services' URIs), its workers."""

    folder: Path
    settings: Settings
    services_env: dict[str, str]  # what `python -m services` runs with: the services' folder and ports
    remote: str  # this team's DVC remote: its own prefix in the services' bucket
    workers: dict[str, subprocess.Popen] = dataclasses.field(default_factory=dict)

    @property
    def bare(self) -> Path:
        """The team's git repository (what a git server would hold)."""
        return self.folder / "repo.git"

    def env(self, home: Path) -> dict[str, str]:
        """A machine's environment: the services' variables, the project's Python first, a private Prefect home."""
        own = {name for name, _ in CREDENTIALS.values()}
        base = {key: value for key, value in os.environ.items() if key not in own}
        for key in (
            "MLFLOW_TRACKING_URI",
            "WANDER_PARENT_RUN_ID",
            "MLFLOW_RUN_ID",
            "PYTHONDONTWRITEBYTECODE",
        ):
            base.pop(key, None)
        return (
            base
            | self.services_env
            | client_env(self.settings)
            | WORKER_ENV
            | {
                "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                "PREFECT_HOME": str(home / ".prefect"),
                "WANDER_DVC_REMOTE": self.remote,
                "WANDER_GIT_URL": str(self.bare),
                "TMPDIR": str(home),
            }
        )

    def run(self, args: list[str], cwd: Path, timeout: float = 600) -> str:
        """A command on a machine whose folder is `cwd`; its output; raise with it when it fails."""
        done = subprocess.run(
            args, cwd=cwd, env=self.env(cwd), capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done.stdout + done.stderr

    def machine(self, name: str) -> Path:
        """A machine's own folder (nothing in it is shared)."""
        path = self.folder / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def start_worker(self, name: str, pool: str) -> None:
        """`prefect worker start` on machine `name`, in a process group of its own (so a test can kill it)."""
        home = self.machine(name)
        log = (home / "worker.log").open("a")
        self.workers[name] = subprocess.Popen(
            ["prefect", "worker", "start", "--pool", pool, "--name", name],
            cwd=home,
            env=self.env(home),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill_worker(self, name: str) -> None:
        """SIGKILL a worker with every process under it (its flow runs, their stages): a machine gone, nobody left
        to report."""
        proc = self.workers.pop(name)
        for pid in [proc.pid, *descendants(proc.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def stop_workers(self) -> None:
        """Stop every worker still running (SIGTERM, then SIGKILL)."""
        for name in list(self.workers):
            proc = self.workers.pop(name)
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def api(self, method: str, path: str, body: dict | None = None) -> object:
        """A call to the Prefect server's REST API."""
        url = f"{self.settings.prefect_api_url}{path}"
        response = httpx.request(method, url, json=body, timeout=30)
        response.raise_for_status()
        return response.json()

    def stage_runs(self, parent_run_id: str) -> list[dict]:
        """The `wander-stage` flow runs under a `wander-team` flow run: name, state, and the worker that ran it."""
        body = {"flow_runs": {"parent_flow_run_id": {"any_": [parent_run_id]}}, "sort": "START_TIME_ASC"}
        children = self.api("POST", "/flow_runs/filter", body)
        runs = []
        for run in children:  # type: ignore[union-attr]
            run_id = run["id"]
            logs = self.api(
                "POST",
                "/logs/filter",
                {"logs": {"flow_run_id": {"any_": [run_id]}}, "sort": "TIMESTAMP_ASC", "limit": 50},
            )
            workers = [
                line["message"].split("'")[1]
                for line in logs  # type: ignore[union-attr]
                if line["message"].startswith("Worker '")
            ]
            runs.append(
                {"name": run["name"], "state": run["state_type"], "worker": workers[0] if workers else None}
            )  # type: ignore[index]
        return runs


def make_team(team: Team, source: Path) -> Team:
    """Push the git repository `source` to the team's bare repository; create its work pools, deployments and the
    lost-run automation on the Prefect server."""
    subprocess.run(["git", "clone", "-q", "--bare", str(source), str(team.bare)], check=True)
    for pool in ("cpu", "gpu"):
        team.run(["prefect", "work-pool", "create", pool, "--type", "process", "--overwrite"], source)
    names = [arg for name in TEAM_DEPLOYMENTS for arg in ("--name", name)]
    team.run(["prefect", "--no-prompt", "deploy", *names], source)
    team.run([sys.executable, "-m", "flows.team", "setup", "--lost-after", str(LOST_AFTER_SECONDS)], source)
    return team


def wait_for(check, timeout: float, every: float = 1.0) -> object:  # noqa: ANN001
    """Poll `check()` until it returns something truthy; that value; TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(every)
    raise TimeoutError(f"nothing after {timeout} s from {check}")
