"""The check before any stage runs (flows/service_check.py): the services the configuration names answer, or one
line per service that does not, credentials masked, and `python -m flows.pipeline` exits 2 before any stage."""

from __future__ import annotations

import dataclasses
import http.server
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flows.service_check import EXTRA_TARGET, check_services
from services import dvc_remote
from services.settings import DVC_BUCKET, Credentials, Settings
from tasks.runtime.scratch_copy import copy_project, project_env

from .running import Services

pytestmark = pytest.mark.slow
CLIENT_ENV = ("MLFLOW_TRACKING_URI", "PREFECT_API_URL", "MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME")


@pytest.fixture
def no_client_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MLflow or Prefect server named by this process's environment."""
    for key in CLIENT_ENV:
        monkeypatch.delenv(key, raising=False)


def dvc_repo(root: Path) -> Path:
    """A scratch git + DVC repository at `root`."""
    from dvc.repo import Repo

    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    Repo.init(str(root)).close()
    return root


def free_port() -> int:
    """A loopback port nothing listens on (now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_running_services_pass(
    services: Services, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = dvc_repo(tmp_path / "repo")
    dvc_remote.configure(repo, services.settings, services.credentials, default=True)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", services.settings.mlflow_uri)
    monkeypatch.setenv("PREFECT_API_URL", services.settings.prefect_api_url)
    assert check_services(repo) == []


def test_a_port_nothing_listens_on_stops_the_pipeline_before_any_stage(tmp_path: Path) -> None:
    root = copy_project(tmp_path / "copy")
    secret = "s3cr3t-pw"
    uri = f"http://wander:{secret}@127.0.0.1:{free_port()}"
    env = project_env(root) | {"MLFLOW_TRACKING_URI": uri}
    done = subprocess.run(
        [sys.executable, "-m", "flows.pipeline"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    masked = uri.replace(f"wander:{secret}@", "***@")
    assert done.stderr.splitlines() == [
        f"python -m flows.pipeline: mlflow at {masked} is not answering (connection refused); "
        "start it (make services) or fix MLFLOW_TRACKING_URI"
    ]
    assert secret not in done.stdout + done.stderr
    assert "Running stage" not in done.stdout + done.stderr
    assert not (root / "mlflow").exists()  # no run anywhere: the project's store was never created


def test_a_wrong_s3_secret_is_one_line_naming_the_remote(
    services: Services, tmp_path: Path, no_client_env: None
) -> None:
    repo = dvc_repo(tmp_path / "repo")
    wrong = dataclasses.replace(services.credentials, s3_secret_key="not-the-secret-" + "x" * 25)
    dvc_remote.configure(repo, services.settings, wrong, default=True)
    problems = check_services(repo)
    assert len(problems) == 1, problems
    assert problems[0].startswith(
        f"dvc remote team (s3://{DVC_BUCKET} at {services.settings.s3_endpoint}) refused the credentials ("
    ), problems
    assert "(SignatureDoesNotMatch)" in problems[0], problems
    assert wrong.s3_secret_key not in problems[0] and services.credentials.s3_secret_key not in problems[0]


def test_an_s3_remote_without_boto3_says_how_to_install_it(
    tmp_path: Path, no_client_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = dvc_repo(tmp_path / "repo")
    settings = Settings.on_free_ports(tmp_path / "unused")
    made_up = Credentials(postgres_password="PW", s3_access_key="KEY", s3_secret_key="SECRET")
    dvc_remote.configure(repo, settings, made_up, default=True)
    monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 raises ImportError
    [problem] = check_services(repo)
    assert problem.startswith(f"dvc remote team (s3://{DVC_BUCKET} at {settings.s3_endpoint}) needs boto3")
    assert EXTRA_TARGET in problem and "SECRET" not in problem


def test_nothing_configured_checks_nothing(
    tmp_path: Path, no_client_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = dvc_repo(tmp_path / "repo")  # DVC's default: no remote; then a local one, as the project's
    subprocess.run(
        [sys.executable, "-m", "dvc", "remote", "add", "-d", "local", "../remote"], cwd=repo, check=True
    )

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("the check opened a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    start = time.monotonic()
    assert check_services(repo) == []
    assert check_services(tmp_path) == []  # no .dvc at all
    assert time.monotonic() - start < 2.0


class _RefusingMLflow(http.server.BaseHTTPRequestHandler):
    """An MLflow stand-in whose /health answers and whose API refuses every credential."""

    def do_GET(self) -> None:
        """/health: 200."""
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def do_POST(self) -> None:
        """Any API call: 403."""
        self.send_response(403)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def refusing_mlflow() -> Iterator[str]:
    """The URL of a server that answers /health and refuses the API with 403."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RefusingMLflow)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_refused_mlflow_credentials_are_one_line_without_the_password(
    refusing_mlflow: str, tmp_path: Path, no_client_env: None
) -> None:
    env = {
        "MLFLOW_TRACKING_URI": refusing_mlflow,
        "MLFLOW_TRACKING_USERNAME": "wander",
        "MLFLOW_TRACKING_PASSWORD": "hunter2-secret",
    }
    assert check_services(tmp_path, env) == [
        f"mlflow at {refusing_mlflow} refused the credentials (403); "
        "fix MLFLOW_TRACKING_USERNAME/_PASSWORD or MLFLOW_TRACKING_TOKEN"
    ]
