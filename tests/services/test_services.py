"""The team's servers on loopback (services/, `make services`): each answers, a second `up` changes nothing, MLflow
keeps runs in PostgreSQL and artifacts in S3, DVC pushes and pulls through the S3 remote, data survives `down` and
`up`, and a service that is down is one line naming it and its URI, credentials redacted."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from services import dvc_remote, objectstore, postgres, stack
from services.daemon import running_pid, stop
from services.http_servers import http_health
from services.settings import DVC_BUCKET, MLFLOW_BUCKET, MLFLOW_DB, PREFECT_DB
from wander.core.process_tree import descendants

from .running import Services, processes_of

pytestmark = pytest.mark.slow
NAMES = ("postgres", "s3", "mlflow", "prefect")


def pids(services: Services) -> dict[str, int | None]:
    """The pid of each service's server, from its pid file."""
    built = stack.services(services.settings, services.credentials)
    return {name: running_pid(service.daemon) for name, service in built.items()}


def secrets_in(text: str, services: Services) -> list[str]:
    """Which credentials appear in `text`."""
    return [name for name, value in vars(services.credentials).items() if value in text]


def test_each_service_answers(services: Services) -> None:
    settings, credentials = services.settings, services.credentials
    assert postgres.health(settings, credentials) is None  # SELECT 1 over TCP with the role's password
    assert objectstore.health(settings, credentials) is None  # a signed ListBuckets
    buckets = {b["Name"] for b in objectstore.client(settings, credentials).list_buckets()["Buckets"]}
    assert {MLFLOW_BUCKET, DVC_BUCKET} <= buckets
    assert http_health(f"{settings.mlflow_uri}/health") is None
    assert http_health(f"{settings.prefect_api_url}/health") is None
    status = services.cli("status")
    assert [line.split(":")[0] for line in status.stdout.splitlines()] == list(NAMES)
    assert all(
        " up at http" in line or " up at postgresql://***@" in line for line in status.stdout.splitlines()
    )
    assert all(pid is not None for pid in pids(services).values())


def test_every_server_talks_on_loopback_only(services: Services) -> None:
    ours = {pid for leader in pids(services).values() if leader for pid in [leader, *descendants(leader)]}
    sockets = subprocess.run(["ss", "-Htuanp"], capture_output=True, text=True, check=True).stdout
    seen = []
    for line in sockets.splitlines():
        if {int(pid) for pid in re.findall(r"pid=(\d+)", line)} & ours:
            state, local, peer = line.split()[1], line.split()[4], line.split()[5]
            seen.append(local if state == "LISTEN" else peer)  # where it listens, or whom it talks to
    assert seen and all(address.startswith("127.0.0.1:") for address in seen), seen


def test_credentials_are_private_and_only_env_prints_them(services: Services) -> None:
    path = services.settings.root / "credentials.json"
    assert path.stat().st_mode & 0o777 == 0o600
    shown = services.cli("status").stdout + services.cli("up").stdout
    logs = "".join(p.read_text(errors="replace") for p in services.settings.logs.iterdir())
    assert secrets_in(shown, services) == [] and secrets_in(logs, services) == []
    exported = services.cli("env").stdout
    assert set(secrets_in(exported, services)) == {"s3_access_key", "s3_secret_key"}  # never the database's
    variables = dict(re.findall(r"^export (\w+)=(.*)$", exported, flags=re.M))
    assert variables["MLFLOW_TRACKING_URI"] == services.settings.mlflow_uri
    assert variables["PREFECT_API_URL"] == services.settings.prefect_api_url
    assert (
        variables["AWS_ENDPOINT_URL"] == variables["MLFLOW_S3_ENDPOINT_URL"] == services.settings.s3_endpoint
    )


def test_a_second_up_restarts_nothing(services: Services) -> None:
    before = pids(services)
    out = services.cli("up").stdout
    for name in NAMES:
        assert f"{name}: already running (pid {before[name]})" in out
    assert "started" not in out
    assert pids(services) == before


def test_an_mlflow_run_lands_in_postgres_and_its_artifact_in_s3(services: Services, tmp_path: Path) -> None:
    import mlflow

    mlflow.set_tracking_uri(services.settings.mlflow_uri)
    client = mlflow.MlflowClient()
    experiment = client.create_experiment(f"services-{secrets.token_hex(4)}")
    run = client.create_run(experiment)
    client.log_metric(run.info.run_id, "win", 0.75, step=3)
    (tmp_path / "report.md").write_text("# a report\n")
    client.log_artifact(run.info.run_id, str(tmp_path / "report.md"))
    client.set_terminated(run.info.run_id)

    with postgres.connect(services.settings, services.credentials, MLFLOW_DB) as connection:
        rows = connection.execute(
            "SELECT key, value, step FROM metrics WHERE run_uuid = %s", [run.info.run_id]
        ).fetchall()
        status = connection.execute(
            "SELECT status FROM runs WHERE run_uuid = %s", [run.info.run_id]
        ).fetchone()
    assert rows == [("win", 0.75, 3)] and status == ("FINISHED",)
    s3 = objectstore.client(services.settings, services.credentials)
    listed = s3.list_objects_v2(Bucket=MLFLOW_BUCKET, Prefix=f"artifacts/{experiment}/{run.info.run_id}/")
    keys = [item["Key"] for item in listed.get("Contents", [])]
    assert keys == [f"artifacts/{experiment}/{run.info.run_id}/artifacts/report.md"]
    assert s3.get_object(Bucket=MLFLOW_BUCKET, Key=keys[0])["Body"].read() == b"# a report\n"


def test_a_stage_s_artifacts_go_to_the_server_s_store(
    services: Services, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The project's tracking with MLFLOW_TRACKING_URI set: the experiment takes the server's artifact location
    # (proxied to S3), not a file:// folder of the machine that created it.
    import mlflow

    from tasks.runtime import tracking

    monkeypatch.setenv("MLFLOW_TRACKING_URI", services.settings.mlflow_uri)
    experiment = f"stages-{secrets.token_hex(4)}"
    (tmp_path / "metrics.json").write_text('{"win": 1}\n')
    with tracking.stage_run(
        "evaluate", {"evaluate": {"games": 2}}, root=tmp_path, experiment=experiment
    ) as run:
        assert tracking.log_artifact(tmp_path / "metrics.json", "metrics")
    assert not mlflow.get_experiment_by_name(experiment).artifact_location.startswith("file:")
    s3 = objectstore.client(services.settings, services.credentials)
    listed = s3.list_objects_v2(Bucket=MLFLOW_BUCKET, Prefix="artifacts/")
    assert any(
        item["Key"].endswith(f"{run.info.run_id}/artifacts/metrics/metrics.json")
        for item in listed["Contents"]
    )
    assert not (tmp_path / "mlflow" / "artifacts").exists()


def _sh(args: list[str], cwd: Path) -> str:
    result = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, f"{args}: {result.stdout}{result.stderr}"
    return result.stdout


def test_dvc_push_and_pull_through_the_s3_remote(services: Services, tmp_path: Path) -> None:
    dvc = str(Path(sys.executable).parent / "dvc")
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com"]
    origin, clone = tmp_path / "origin", tmp_path / "clone"
    origin.mkdir()
    _sh(["git", "init", "-q"], origin)
    _sh([dvc, "init", "-q"], origin)
    payload = secrets.token_bytes(4096)
    (origin / "data.bin").write_bytes(payload)
    _sh([dvc, "add", "-q", "data.bin"], origin)
    _sh([*git, "add", "-A"], origin)
    _sh([*git, "commit", "-qm", "data"], origin)
    out = services.cli("dvc-remote", str(origin), "--default").stdout
    assert secrets_in(out, services) == []
    local = origin / ".dvc" / "config.local"
    assert local.stat().st_mode & 0o777 == 0o600
    assert _sh(["git", "status", "--porcelain"], origin) == ""  # the keys are in no file git would commit
    _sh([dvc, "push"], origin)

    _sh(["git", "clone", "-q", str(origin), str(clone)], tmp_path)
    dvc_remote.configure(clone, services.settings, services.credentials, default=True)
    _sh([dvc, "pull"], clone)
    assert (clone / "data.bin").read_bytes() == payload
    s3 = objectstore.client(services.settings, services.credentials)
    assert s3.list_objects_v2(Bucket=DVC_BUCKET).get("KeyCount", 0) >= 1


def test_data_survives_down_and_up(services: Services) -> None:
    settings, credentials = services.settings, services.credentials
    token = secrets.token_hex(8)
    with postgres.connect(settings, credentials, PREFECT_DB) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS survives (token text)")
        connection.execute("INSERT INTO survives VALUES (%s)", [token])
    s3 = objectstore.client(settings, credentials)
    s3.put_object(Bucket=DVC_BUCKET, Key=f"survives/{token}", Body=token.encode())
    variable = httpx.post(
        f"{settings.prefect_api_url}/variables/", json={"name": f"v{token}", "value": token}, trust_env=False
    )
    assert variable.status_code == 201, variable.text
    before = pids(services)

    out = services.cli("down").stdout
    assert [line.split(":")[0] for line in out.splitlines()] == list(reversed(NAMES))
    assert all("stopped" in line for line in out.splitlines())
    assert processes_of(settings.root) == []
    assert all(pid is None for pid in pids(services).values())
    assert stack.status(settings, report=lambda line: None) is False

    out = services.cli("up").stdout
    assert all(f"{name}: started" in out for name in NAMES)
    after = pids(services)
    assert all(after[name] not in (None, before[name]) for name in NAMES)
    with postgres.connect(settings, credentials, PREFECT_DB) as connection:
        assert connection.execute("SELECT token FROM survives").fetchall() == [(token,)]
    assert s3.get_object(Bucket=DVC_BUCKET, Key=f"survives/{token}")["Body"].read() == token.encode()
    variable = httpx.get(f"{settings.prefect_api_url}/variables/name/v{token}", trust_env=False)
    assert variable.status_code == 200 and variable.json()["value"] == token


def test_a_service_down_is_one_line_naming_it_with_credentials_redacted(services: Services) -> None:
    settings, credentials = services.settings, services.credentials
    assert stop(stack.services(settings, credentials)["postgres"].daemon)
    status = services.cli("status", check=False)
    assert status.returncode == 1
    down = [line for line in status.stdout.splitlines() if " down at " in line]
    assert down == [line for line in down if line.startswith("postgres: down at postgresql://***@127.0.0.1:")]
    assert len(down) == 1 and f":{settings.postgres_port}/" in down[0]
    assert secrets_in(status.stdout, services) == []

    out = services.cli("up").stdout  # starts what is down, leaves the rest
    assert "postgres: started" in out
    assert all(f"{name}: already running" in out for name in ("s3", "mlflow", "prefect"))
    assert services.cli("status").returncode == 0


def test_wrong_credentials_from_the_environment_are_refused_while_running(services: Services) -> None:
    env = services.env | {"WANDER_POSTGRES_PASSWORD": "not-the-one-it-runs-with"}
    result = subprocess.run(
        [sys.executable, "-m", "services", "up"], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "services-down" in result.stderr
    assert "not-the-one" not in result.stdout + result.stderr
    assert json.loads((services.settings.root / "credentials.json").read_text()) == vars(services.credentials)
