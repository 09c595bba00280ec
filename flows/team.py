"""The pipeline on a team's servers: each DVC stage its own flow run, on the work pool of the machines it needs.

`wander-team` (the orchestrating flow) opens the parent MLflow run and, stage by stage in dvc.yaml's order, runs the
`wander-stage` deployment of the stage's pool (`cpu` for data, `gpu` for training: `POOLS`, or the deployment's
`pools` parameter in prefect.yaml) and waits for it. A stage flow runs in its worker's clone of the repository (the
deployment's `git_clone` pull step), checked out at the orchestrator's commit; it takes the run's dvc.lock so far
from the parent MLflow run, `dvc pull`s the stage's inputs from the team's DVC remote, reproduces the stage (DVC skips
it when nothing it reads changed), `dvc push`es its outputs and puts the new dvc.lock back on the parent run. So
workers share nothing but the servers: the MLflow server (runs, registry, the run's dvc.lock), the S3 remote (data
and models) and the Prefect server (flow runs).

A stage run that fails fails the pipeline with the stage's own error. One that crashed (its worker was killed:
Prefect marks a flow run whose heartbeats stop Crashed, `python -m flows.team setup` creates that automation) is run
again, on whichever worker of its pool is free. `python -m flows.team pull RUN_ID` gives any clone a run's dvc.lock
and data: after it, `dvc status` is clean. docs/team.md says what a worker needs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.runtime import flow_run

from flows.pipeline import PROJECT, RETRIES, StageFailed, check_params, dvc_stages, reproduce, stream, summary
from flows.service_check import check_services

# Training stages go to the machines with accelerators; every other stage to the `cpu` pool.
POOLS = {"sft": "gpu", "grpo": "gpu"}
DEFAULT_POOL = "cpu"
STAGE_FLOW = "wander-stage"
LOCK_FILE = "dvc.lock"  # also the artifact's name on the parent run
# The team's DVC remote (s3://bucket/path); unset, .dvc/config's default remote.
REMOTE_ENV = "WANDER_DVC_REMOTE"
REMOTE_NAME = "team"
# A stage whose worker vanished is rerun this many times (any stage; `RETRIES` adds the teacher's flakiness).
LOST_WORKER_RETRIES = 2
# Prefect marks a running stage flow run Crashed when no heartbeat came for this long: three missed beats of a
# worker whose PREFECT_FLOWS_HEARTBEAT_FREQUENCY is 30 (Prefect's least; its default, 180, is refused by
# `check_heartbeat`: the automation would crash live runs).
HEARTBEAT_SECONDS = 30
LOST_AFTER = timedelta(seconds=3 * HEARTBEAT_SECONDS)
LOST_RUN_AUTOMATION = "wander: crash flow runs whose worker is gone"
# How often the orchestrator reads a stage run's state: Prefect's default, 5 s, left each stage's successor waiting
# 2.5 s on average (a smoke run's 8 stages take ~8 s each).
STAGE_POLL_SECONDS = 1.0


class NoTeamServer(ValueError):
    """The team pipeline was started without a tracking server to share the run through, or a service it names is
    down or refuses the credentials."""


def git(root: Path, *args: str) -> str:
    """Run git in `root`; its stdout, stripped."""
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()


def tracking_server() -> str:
    """MLFLOW_TRACKING_URI when it names a server; NoTeamServer otherwise (a sqlite file is each worker's own)."""
    uri = os.environ.get("MLFLOW_TRACKING_URI", "")
    if not uri.startswith(("http://", "https://")):
        raise NoTeamServer(
            "the team pipeline shares its run through an MLflow tracking server, and MLFLOW_TRACKING_URI "
            f"names {'none' if not uri else 'a local store'}: set it to the server "
            "(docs/team.md; `python -m services env` prints make services' variables)"
        )
    return uri


def connect(root: Path) -> None:
    """Point `root` at the team's DVC remote and check every service it uses; NoTeamServer names what is wrong,
    before anything runs."""
    tracking_server()
    use_team_remote(root)
    # One line each: the service, its address (credentials masked), the fix.
    if problems := check_services(root):
        raise NoTeamServer("\n".join(problems))


def check_heartbeat() -> None:
    """Refuse to run a stage the lost-run automation would crash while it runs: one whose worker sends heartbeats
    less often than twice per the automation's window. No automation: nothing to refuse."""
    from prefect.automations import Automation
    from prefect.settings import get_current_settings

    every = get_current_settings().flows.heartbeat_frequency
    try:
        within = Automation.read(name=LOST_RUN_AUTOMATION).trigger.within.total_seconds()
    except ValueError:  # not created (python -m flows.team setup): a lost stage then waits for a person
        return
    if every is None or 2 * every > within:
        raise NoTeamServer(
            f"this worker's flow runs send a heartbeat every {every or 'never'} s, and the Prefect server crashes "
            f"a stage run after {within:.0f} s without one ({LOST_RUN_AUTOMATION!r}): start the worker with "
            f"PREFECT_FLOWS_HEARTBEAT_FREQUENCY={HEARTBEAT_SECONDS} (docs/team.md)"
        )


def checkout(root: Path, commit: str | None) -> None:
    """Put the clone at `commit` (the orchestrator's), fetching it when the pull step cloned another one."""
    if not commit or git(root, "rev-parse", "HEAD") == commit:
        return
    git(root, "fetch", "--quiet", "--depth", "1", "origin", commit)
    git(root, "checkout", "--quiet", "--detach", commit)


def use_team_remote(root: Path) -> None:
    """Make `$WANDER_DVC_REMOTE` this clone's default DVC remote, in .dvc/config.local (never committed) as `dvc
    remote add --local --default` would; endpoint and keys from the usual AWS variables, which DVC reads itself.
    Unset: .dvc/config's default remote stays."""
    from dvc.config import Config

    url = os.environ.get(REMOTE_ENV)
    if not url:
        return
    with Config(dvc_dir=root / ".dvc").edit("local") as local:
        local["remote"][REMOTE_NAME] = {"url": url}
        local["core"]["remote"] = REMOTE_NAME


def fetch_lock(root: Path, run_id: str) -> bool:
    """Write the run's dvc.lock (an artifact of its parent MLflow run) into `root`; False when it has none yet."""
    import mlflow

    from tasks.runtime.tracking import setup
    from wander.core.atomic_io import write_text

    setup(root)
    client = mlflow.MlflowClient()
    if LOCK_FILE not in {item.path for item in client.list_artifacts(run_id)}:
        return False
    with tempfile.TemporaryDirectory() as folder:
        local = Path(client.download_artifacts(run_id, LOCK_FILE, folder))
        write_text(root / LOCK_FILE, local.read_text())
    return True


def require_lock(root: Path, run_id: str) -> None:
    """Write the run's dvc.lock into `root`; FileNotFoundError, naming the run, when it has none."""
    if not fetch_lock(root, run_id):
        raise FileNotFoundError(f"MLflow run {run_id} has no {LOCK_FILE}: it is no team pipeline run")


def publish_lock(root: Path, run_id: str) -> None:
    """Put `root`'s dvc.lock on the parent MLflow run: the next stage, on any worker, starts from it."""
    import mlflow

    from tasks.runtime.tracking import setup

    setup(root)
    mlflow.MlflowClient().log_artifact(run_id, str(root / LOCK_FILE))


def dvc(*args: str) -> list[str]:
    """A dvc command line with the project's Python environment's dvc."""
    return [str(Path(sys.executable).parent / "dvc"), *args]


@flow(name=STAGE_FLOW, flow_run_name="{stage}")
def team_stage(stage: str, parent_run_id: str, commit: str | None = None, force: bool = False) -> dict:
    """One DVC stage on this worker's clone: the run's dvc.lock, `dvc pull` of what it reads, `dvc repro` of it,
    `dvc push` of what it wrote, the new dvc.lock back on the parent run."""
    root = Path.cwd()  # the deployment's pull step cloned the repository here
    check_heartbeat()
    checkout(root, commit)
    connect(root)
    start = time.monotonic()
    if fetch_lock(root, parent_run_id):  # else the first stage: the commit's own dvc.lock
        # The stage's own outputs too: an unchanged stage is then a skip, and grpo's kept curriculum stages are there.
        stream(dvc("pull", "--quiet", "--allow-missing", "--with-deps", stage), str(root), parent_run_id)
        if force:  # run whole: a persisted output (grpo's curriculum stages) would be kept, not rerun
            remove_outputs(root, stage)
    skipped = reproduce(stage, str(root), parent_run_id, force)
    stream(dvc("push", "--quiet", stage), str(root), parent_run_id)
    publish_lock(root, parent_run_id)
    return {"stage": stage, "seconds": time.monotonic() - start, "skipped": skipped}


def remove_outputs(root: Path, stage: str) -> None:
    """Delete the outputs the run's dvc.lock records for `stage` from this clone."""
    from tasks.params.yaml_file import read_yaml

    for out in read_yaml(root / LOCK_FILE).get("stages", {}).get(stage, {}).get("outs", []):
        path = root / out["path"]
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def rerun_when_lost(task: Any, task_run: Any, state: Any) -> bool:
    """Retry a stage whose flow run crashed (its worker died) or that talks to the outside world (`RETRIES`)."""
    try:
        state.result()
    except StageLost:
        return True
    except Exception:  # the stage's own error: rerunning it the same way fails the same way
        return task_run.name.split("@")[0] in RETRIES
    return False


class StageLost(StageFailed):
    """A stage's flow run crashed or was cancelled: its worker went away."""


@task(
    name="stage-run",
    task_run_name="{stage}@{pool}",
    retries=LOST_WORKER_RETRIES,
    retry_delay_seconds=5,
    retry_condition_fn=rerun_when_lost,
)
def run_on_pool(stage: str, pool: str, parent_run_id: str, commit: str, force: bool) -> dict:
    """Run `wander-stage/<pool>` for one stage and wait for it; raise with the stage's own error when it fails."""
    from prefect.deployments import run_deployment

    parameters = {"stage": stage, "parent_run_id": parent_run_id, "commit": commit, "force": force}
    run = run_deployment(
        f"{STAGE_FLOW}/{pool}", parameters=parameters, timeout=None, poll_interval=STAGE_POLL_SECONDS
    )
    state = run.state
    if state is not None and state.is_completed():
        return {"stage": stage, "pool": pool, "flow_run": run.name}
    where = f"stage {stage} (flow run {run.name} on pool {pool})"
    if state is None or state.is_crashed() or state.is_cancelled():
        raise StageLost(f"{where} {state.name if state else 'vanished'}: {state.message if state else ''}")
    raise StageFailed(f"{where} failed: {state.message}")


@flow(name="wander-team")
def team_pipeline(
    pools: dict[str, str] | None = None,
    stages: list[str] | None = None,
    force: bool = False,
    experiment: str | None = None,
    from_run: str | None = None,
) -> list[dict]:
    """Run each DVC stage as a `wander-stage` flow run on its pool under one parent MLflow run; then pull the run's
    outputs here and log its summary. `from_run` (an earlier team run's parent MLflow run id) starts the run from
    that run's dvc.lock, so `stages` read its outputs from the remote instead of rerunning the stages before them."""
    from tasks.runtime.tracking import pipeline_run

    root = PROJECT  # the orchestrator's own clone: the commit every stage checks out
    connect(root)
    check_params(root)
    commit = git(root, "rev-parse", "HEAD")
    pools = POOLS if pools is None else pools
    names = stages or dvc_stages(root)
    results = []
    # The flow run's id too: who started a deployment run finds its MLflow run by it.
    logged = {"stages": ",".join(names), "commit": commit, "prefect_flow_run": flow_run.get_id()}
    if from_run:  # before the run opens: a run id that is no team run is refused first
        require_lock(root, from_run)
        logged["from_run"] = from_run
    with pipeline_run("team", logged, root=root, experiment=experiment) as run_id:
        if from_run:
            publish_lock(root, run_id)
        for name in names:
            results.append(run_on_pool(name, pools.get(name, DEFAULT_POOL), run_id, commit, force))
        pull_run(root, run_id)
    try:
        get_run_logger().info(summary(root, run_id))
    except FileNotFoundError:  # a run of some stages, without the evaluation
        get_run_logger().info(
            f"stages {', '.join(names)} done; MLflow run {run_id}, no evaluation in this run"
        )
    return results


def pull_run(root: Path, run_id: str) -> None:
    """Give `root` the run's dvc.lock and pull the outputs of every stage it ran from the team's remote."""
    from tasks.params.yaml_file import read_yaml

    require_lock(root, run_id)
    stages = list(read_yaml(root / LOCK_FILE).get("stages", {}))  # a run of some stages locks only those
    done = subprocess.run(dvc("pull", "--quiet", *stages), cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise StageFailed(f"dvc pull of run {run_id} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


def lost_run_automation(lost_after: timedelta = LOST_AFTER) -> Any:
    """The Prefect automation that marks a running flow run Crashed when no heartbeat came for `lost_after`."""
    from prefect.automations import Automation
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import EventTrigger, Posture

    trigger = EventTrigger(
        after={"prefect.flow-run.heartbeat"},
        expect={
            "prefect.flow-run.heartbeat",
            "prefect.flow-run.Completed",
            "prefect.flow-run.Failed",
            "prefect.flow-run.Cancelled",
            "prefect.flow-run.Crashed",
        },
        match={"prefect.resource.id": "prefect.flow-run.*"},
        # Only the stage runs: other flows on the server beat at their own pace (Prefect's default, 180 s).
        match_related={"prefect.resource.role": "flow", "prefect.resource.name": STAGE_FLOW},
        for_each={"prefect.resource.id"},
        posture=Posture.Proactive,
        threshold=1,
        within=lost_after,
    )
    action = ChangeFlowRunState(state=StateType.CRASHED, message="no heartbeat: its worker is gone")
    return Automation(name=LOST_RUN_AUTOMATION, trigger=trigger, actions=[action])


def setup_server(lost_after: timedelta = LOST_AFTER) -> str:
    """Create what the team pipeline needs on the Prefect server once: the lost-run automation."""
    from prefect.automations import Automation

    try:
        Automation.read(name=LOST_RUN_AUTOMATION)
        return f"automation {LOST_RUN_AUTOMATION!r} already there"
    except ValueError:
        lost_run_automation(lost_after).create()
        return f"created automation {LOST_RUN_AUTOMATION!r}"


def main(argv: list[str] | None = None) -> int:
    """`python -m flows.team setup | pull RUN_ID`: prepare the Prefect server, or bring a team run here."""
    parser = argparse.ArgumentParser(prog="python -m flows.team", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    setup = sub.add_parser("setup", help="create the automation that reruns stages whose worker died")
    setup.add_argument(
        "--lost-after",
        type=float,
        default=LOST_AFTER.total_seconds(),
        help="seconds without a heartbeat after which a running flow run is Crashed (at least twice the workers' "
        "PREFECT_FLOWS_HEARTBEAT_FREQUENCY)",
    )
    pulled = sub.add_parser("pull", help="write a team run's dvc.lock here and dvc pull its data and models")
    pulled.add_argument("run_id", help="the team run's parent MLflow run id (its summary names it)")
    args = parser.parse_args(argv)
    try:
        if args.command == "setup":
            print(setup_server(timedelta(seconds=args.lost_after)))
        else:
            connect(PROJECT)
            pull_run(PROJECT, args.run_id)
    except (NoTeamServer, FileNotFoundError) as exc:
        print(f"python -m flows.team: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
