"""The pipeline on a team's servers (flows/team.py): two workers, each in its own folder with its own clone of a bare
repository, sharing nothing but the services; data stages on the `cpu` worker, training on the `gpu` one; the
champion on the MLflow server (PostgreSQL rows, S3 objects), the outputs in the S3 remote; a third clone pulls the
run and reproduces its evaluation; a worker killed mid-stage and an MLflow server restarted mid-stage change no
output; the scheduled retrain runs on a gpu worker's clone."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pytest
import yaml

from services import objectstore, postgres, stack
from services.daemon import stop
from services.local_team import LOST_AFTER_SECONDS, Team, make_team, wait_for
from services.settings import DVC_BUCKET, MLFLOW_BUCKET, MLFLOW_DB
from tasks.runtime.scratch_copy import copy_project
from wander.core.process_tree import descendants

from .running import Services

pytestmark = pytest.mark.slow
TRAINING = {"sft", "grpo"}  # the stages prefect.yaml's `team` deployment sends to the gpu pool
# Outputs two runs of the same commit give byte for byte (the others hold timings: seconds, games per second).
TRAINED = ("data/models/base", "data/datasets", "data/synth", "data/sft", "data/models/sft")
EVALUATED = ("data/eval/matrix.json", "data/eval/matrix.csv", "data/eval/episodes.jsonl.gz")
RUN_SECONDS = 900
# The faults' run is the training stages again, from the clean run's data (its dvc.lock, the remote): the faults land
# in sft and grpo, and the evaluation is the third clone's test.
TRAINING_AGAIN = ['stages=["sft", "grpo"]', "force=true"]


@pytest.fixture(scope="module")
def team(services: Services) -> Iterator[Team]:
    """A bare repository of the smoke project, its deployments, a cpu worker and a gpu worker."""
    folder = Path(tempfile.mkdtemp(prefix="wander-team-"))
    remote = f"s3://{DVC_BUCKET}/team-{secrets.token_hex(4)}"  # this module's own prefix in the bucket
    built = Team(folder, services.settings, services.env, remote)
    make_team(built, copy_project(built.machine("source"), "smoke"))
    built.start_worker("cpu-worker", "cpu")
    built.start_worker("gpu-worker", "gpu")
    try:
        yield built
    finally:
        built.stop_workers()
        subprocess.run(["rm", "-rf", str(folder)], check=False)


def run_deployment(team: Team, name: str, *params: str) -> subprocess.Popen:
    """`prefect deployment run NAME --watch` from the source machine, not waited for."""
    args = ["prefect", "deployment", "run", name, "--watch", "--watch-interval", "2"]
    args += [arg for param in params for arg in ("--param", param)]
    source = team.machine("source")
    return subprocess.Popen(
        args, cwd=source, env=team.env(source), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def finished(team: Team, proc: subprocess.Popen) -> str:
    """Wait for a watched deployment run; its flow run id (raise with its state's message when it did not complete)."""
    out, _ = proc.communicate(timeout=RUN_SECONDS)
    flow_run_id = next((line.split("UUID:")[1].strip() for line in out.splitlines() if "UUID:" in line), None)
    if proc.returncode != 0 and flow_run_id:
        state = team.api("GET", f"/flow_runs/{flow_run_id}")["state"]  # type: ignore[index]
        raise AssertionError(f"{state['type']}: {state['message']}\n{out[-2000:]}")
    assert proc.returncode == 0 and flow_run_id, out[-4000:]
    return flow_run_id


def server(services: Services) -> mlflow.MlflowClient:
    """MLflow's client on the services' tracking server."""
    return mlflow.MlflowClient(services.settings.mlflow_uri)


def team_run_id(services: Services, flow_run_id: str) -> str:
    """The parent MLflow run the `wander-team` flow run opened (its `prefect_flow_run` param)."""
    client = server(services)
    experiments = [e.experiment_id for e in client.search_experiments()]
    (run,) = client.search_runs(experiments, f"params.prefect_flow_run = '{flow_run_id}'")
    return run.info.run_id


def run_lock(services: Services, run_id: str) -> dict:
    """The dvc.lock a team run left on its parent MLflow run."""
    with tempfile.TemporaryDirectory() as folder:
        return yaml.safe_load(
            Path(server(services).download_artifacts(run_id, "dvc.lock", folder)).read_text()
        )


def outs(lock: dict) -> dict[str, str]:
    """Each output path of a dvc.lock and its md5."""
    return {out["path"]: out["md5"] for stage in lock["stages"].values() for out in stage.get("outs", [])}


@pytest.fixture(scope="module")
def clean_run(team: Team, services: Services) -> dict:
    """The smoke pipeline through `prefect deployment run 'wander-team/team'`: its flow run and MLflow run."""
    flow_run_id = finished(team, run_deployment(team, "wander-team/team"))
    return {"flow_run": flow_run_id, "mlflow_run": team_run_id(services, flow_run_id)}


def test_data_stages_on_cpu_and_training_on_gpu(team: Team, clean_run: dict) -> None:
    runs = team.stage_runs(clean_run["flow_run"])
    stages = subprocess.run(
        ["dvc", "stage", "list", "--name-only"],
        cwd=team.machine("source"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert [run["name"] for run in runs] == stages
    assert all(run["state"] == "COMPLETED" for run in runs), runs
    for run in runs:
        assert run["worker"] == ("gpu-worker" if run["name"] in TRAINING else "cpu-worker"), run


def test_champion_registered_on_the_server(team: Team, services: Services, clean_run: dict) -> None:
    client = server(services)
    (model,) = client.search_registered_models()
    champion = client.get_model_version_by_alias(model.name, "champion")
    with postgres.connect(services.settings, services.credentials, MLFLOW_DB) as db:
        rows = db.execute("SELECT name, version FROM model_versions").fetchall()
        aliases = db.execute("SELECT alias, version FROM registered_model_aliases").fetchall()
    assert (model.name, int(champion.version)) in rows
    assert ("champion", int(champion.version)) in aliases
    s3 = objectstore.client(services.settings, services.credentials)
    listed = s3.list_objects_v2(Bucket=MLFLOW_BUCKET, Prefix="artifacts/")
    keys = [item["Key"] for item in listed.get("Contents", [])]
    run_artifacts = [key for key in keys if f"/{champion.run_id}/" in key or "/models/m-" in key]
    assert any(key.endswith("config.json") for key in run_artifacts), keys[:20]
    assert any(key.endswith("dvc.lock") and clean_run["mlflow_run"] in key for key in keys)


def test_outputs_in_the_s3_remote(team: Team, services: Services, clean_run: dict) -> None:
    prefix = team.remote.removeprefix(f"s3://{DVC_BUCKET}/")
    s3 = objectstore.client(services.settings, services.credentials)
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=DVC_BUCKET, Prefix=f"{prefix}/files/md5/")
    stored = {
        item["Key"].split("/files/md5/")[1].replace("/", "")
        for page in pages
        for item in page.get("Contents", [])
    }
    lock = outs(run_lock(services, clean_run["mlflow_run"]))
    assert set(lock.values()) <= stored, set(lock.values()) - stored


def test_a_third_clone_pulls_the_run_and_reproduces_its_evaluation(team: Team, clean_run: dict) -> None:
    third = team.machine("third")
    clone = third / "repo"
    subprocess.run(["git", "clone", "-q", str(team.bare), str(clone)], check=True)
    team.run([sys.executable, "-m", "flows.team", "pull", clean_run["mlflow_run"]], clone)
    assert "up to date" in team.run(["dvc", "status"], clone)
    pulled = {path: (clone / path).read_bytes() for path in EVALUATED}
    # The pulled lineage and champion played again here: the run's games, byte for byte.
    team.run([sys.executable, "-m", "tasks.evaluate"], clone)
    for path, data in pulled.items():
        assert (clone / path).read_bytes() == data, path


def test_the_retrain_runs_on_a_gpu_worker(team: Team, services: Services, clean_run: dict) -> None:
    client = server(services)
    (model,) = client.search_registered_models()
    before = {v.version for v in client.search_model_versions(f"name = '{model.name}'")}
    flow_run_id = finished(team, run_deployment(team, "wander-retrain/retrain-team", "seed=7"))
    logs = team.api("POST", "/logs/filter", {"logs": {"flow_run_id": {"any_": [flow_run_id]}}})
    assert any(line["message"].startswith("Worker 'gpu-worker'") for line in logs)  # type: ignore[union-attr]
    after = {v.version for v in client.search_model_versions(f"name = '{model.name}'")}
    assert len(after - before) == 1  # the retrained candidate, registered on the server


def stage_process(worker: subprocess.Popen, stage: str) -> int | None:
    """The pid of `python -m tasks.<stage>` under a worker, if it runs."""
    for pid in descendants(worker.pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"tasks.{stage}".encode() in cmdline:
            return pid
    return None


def test_a_killed_worker_and_a_restarted_mlflow_server_change_no_output(
    team: Team, services: Services, clean_run: dict
) -> None:
    run = run_deployment(team, "wander-team/team", *TRAINING_AGAIN, f"from_run={clean_run['mlflow_run']}")
    wait_for(lambda: stage_process(team.workers["gpu-worker"], "sft"), RUN_SECONDS)
    team.kill_worker("gpu-worker")  # the machine is gone, its flow run and stage with it: nobody reports
    team.start_worker("gpu-worker-2", "gpu")
    wait_for(lambda: stage_process(team.workers["gpu-worker-2"], "grpo"), RUN_SECONDS)
    mlflow_server = stack.services(services.settings, services.credentials)["mlflow"]
    stop(mlflow_server.daemon)
    services.cli("up")  # back on the same port and database, a few seconds later
    flow_run_id = finished(team, run)

    runs = team.stage_runs(flow_run_id)
    sft = [r for r in runs if r["name"] == "sft"]
    assert [r["state"] for r in sft] == ["CRASHED", "COMPLETED"], sft  # the lost run, then its rerun
    assert sft[1]["worker"] == "gpu-worker-2"
    faulted, reference = (
        outs(run_lock(services, team_run_id(services, flow_run_id))),
        outs(run_lock(services, clean_run["mlflow_run"])),
    )
    for path in TRAINED:
        assert faulted[path] == reference[path], path
    assert same_models(services, team, faulted["data/models/grpo"], reference["data/models/grpo"])
    assert logged(services, team_run_id(services, flow_run_id), "grpo") == logged(
        services, clean_run["mlflow_run"], "grpo"
    )


def same_models(services: Services, team: Team, left: str, right: str) -> bool:
    """Whether two versions of a DVC folder hold the same weights (their .dir listings, read from the S3 remote)."""
    s3 = objectstore.client(services.settings, services.credentials)
    prefix = team.remote.removeprefix(f"s3://{DVC_BUCKET}/")

    def weights(md5: str) -> dict[str, str]:
        key = f"{prefix}/files/md5/{md5[:2]}/{md5[2:]}"
        listing = json.loads(s3.get_object(Bucket=DVC_BUCKET, Key=key)["Body"].read())
        return {
            entry["relpath"]: entry["md5"] for entry in listing if entry["relpath"].endswith(".safetensors")
        }

    found = weights(left)
    return bool(found) and found == weights(right)


def logged(services: Services, parent_run_id: str, stage: str) -> dict:
    """What a stage's MLflow runs under a parent logged: each metric's number of values, and the artifact paths."""
    client = server(services)
    parent = client.get_run(parent_run_id)
    children = client.search_runs(
        [parent.info.experiment_id],
        f"tags.mlflow.parentRunId = '{parent_run_id}'",
        order_by=["attributes.start_time ASC"],
    )
    record = {}
    for child in children:
        if not child.info.run_name.startswith(stage):
            continue
        history = {key: len(client.get_metric_history(child.info.run_id, key)) for key in child.data.metrics}
        history.pop("seconds", None)
        artifacts = sorted(item.path for item in client.list_artifacts(child.info.run_id))
        record[child.info.run_name] = {"metrics": history, "artifacts": artifacts}
    return record


def team_command(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`python -m flows.team pull RUN` in `root`: the checks every team flow makes before it does anything."""
    return subprocess.run(
        [sys.executable, "-m", "flows.team", "pull", "0" * 32],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_wrong_s3_key_or_a_stopped_mlflow_is_one_line_before_anything_runs(
    services: Services, tmp_path: Path
) -> None:
    root = copy_project(tmp_path / "copy")
    team = Team(tmp_path, services.settings, services.env, f"s3://{DVC_BUCKET}/checks")
    secret = "not-the-secret-" + "x" * 25
    wrong_key = team_command(root, team.env(tmp_path) | {"AWS_SECRET_ACCESS_KEY": secret})
    assert wrong_key.returncode == 2, wrong_key.stdout + wrong_key.stderr
    (line,) = wrong_key.stderr.splitlines()
    assert line.startswith(f"python -m flows.team: dvc remote team (s3://{DVC_BUCKET}/checks at "), line
    assert "refused the credentials" in line and secret not in line
    no_mlflow = "http://127.0.0.1:9"  # the discard port: nothing listens
    stopped = team_command(root, team.env(tmp_path) | {"MLFLOW_TRACKING_URI": no_mlflow})
    assert stopped.returncode == 2
    assert stopped.stderr.splitlines() == [
        f"python -m flows.team: mlflow at {no_mlflow} is not answering (connection refused); "
        "start it (make services) or fix MLFLOW_TRACKING_URI"
    ]
    assert not (root / "dvc.lock").exists() and not (root / "data").exists()  # nothing pulled, nothing run


def test_a_worker_beating_slower_than_the_automation_expects_is_refused(team: Team) -> None:
    slow = team.env(team.folder) | {"PREFECT_FLOWS_HEARTBEAT_FREQUENCY": "180"}  # Prefect's default
    done = subprocess.run(
        [sys.executable, "-c", "from flows.team import check_heartbeat; check_heartbeat()"],
        env=slow,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert (
        "this worker's flow runs send a heartbeat every 180 s, and the Prefect server crashes a stage run after "
        f"{LOST_AFTER_SECONDS} s without one" in done.stderr
    ), done.stderr[-2000:]
