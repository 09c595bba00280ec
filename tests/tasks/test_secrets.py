"""Credentials stay out of logs and MLflow: URL userinfo is masked, a key given as api_key_env is refused."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
import yaml

from tasks import generate
from tasks.params.load import ParamsError, load_params
from tasks.runtime import tracking
from wander import load_environment
from wander.core.logs import redact_url
from wander.policies.openai_policy import OpenAIPolicy, PolicyRequestError
from wander.policies.openai_policy_config import OpenAIPolicyConfig
from wander.policies.openai_server import serve_in_thread, teacher_app

SECRET = "s3cr3t-k3y-0f-th3-t3ach3r"
KEYS = [
    "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    "hf_abcdefghijklmnop",
    "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z7Q",
    "my key",
]


def test_redact_url_masks_userinfo_only() -> None:
    assert redact_url(f"http://user:{SECRET}@host:8000/v1") == "http://***@host:8000/v1"
    assert (
        redact_url(f"POST https://{SECRET}@api.x/v1/chat?a=b@c ok")
        == "POST https://***@api.x/v1/chat?a=b@c ok"
    )
    assert (
        redact_url("http://127.0.0.1:8000/v1 mail me@example.org")
        == "http://127.0.0.1:8000/v1 mail me@example.org"
    )


def test_a_stage_logs_and_mlflow_params_never_show_url_credentials(tmp_path: Path, params_at) -> None:
    """The synthesize stage, as DVC runs it (its own process, --verbose: every HTTP request logged), on loopback."""
    params = params_at(tmp_path)
    generate.run(load_params(params=params))
    with serve_in_thread(teacher_app(load_environment("tictactoe"))) as url:
        params["synthesize"].update(
            teacher_url=url.replace("http://", f"http://wander:{SECRET}@"), num_episodes=4, batch_size=4
        )
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
        env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
        env.pop(tracking.PARENT_RUN_ENV, None)
        done = subprocess.run(
            [sys.executable, "-m", "tasks.synthesize", "--verbose"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert done.returncode == 0, done.stderr
    logged = done.stdout + done.stderr
    assert SECRET not in logged and "HTTP Request: POST http://***@127.0.0.1:" in logged
    client = mlflow.MlflowClient(env["MLFLOW_TRACKING_URI"])
    (run,) = client.search_runs([client.get_experiment_by_name(tracking.DEFAULT_EXPERIMENT).experiment_id])
    assert run.data.params["synthesize/teacher_url"] == url.replace("http://", "http://***@")
    assert not any(SECRET in str(v) for v in run.data.params.values())
    outputs = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".yaml")]
    assert not any(SECRET in p.read_text() for p in outputs if p.name != "params.yaml")


def test_policy_errors_and_retry_warnings_never_show_url_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = OpenAIPolicyConfig(
        base_url=f"http://me:{SECRET}@127.0.0.1:{port}/v1", model="m", max_retries=2, backoff_base=0.01
    )
    policy = OpenAIPolicy(config)
    with caplog.at_level(logging.WARNING), pytest.raises(PolicyRequestError) as info:
        policy([[{"role": "user", "content": "hi"}]])
    assert (
        SECRET not in str(info.value)
        and SECRET not in repr(policy)
        and "http://***@127.0.0.1" in str(info.value)
    )
    assert len(caplog.records) == 2 and not any(SECRET in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("key", KEYS)
def test_a_key_given_as_api_key_env_is_refused_without_repeating_it(
    key: str, params_at, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="must be the NAME of the environment variable") as info:
        OpenAIPolicyConfig(api_key_env=key)
    assert key not in str(info.value)
    params = params_at(tmp_path)
    params["synthesize"]["teacher"]["api_key_env"] = key
    with pytest.raises(ParamsError, match="looks like a key") as info:
        load_params(params=params)
    assert key not in str(info.value)


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "WANDER_TEACHER_KEY_2", "together_api_key", ""])
def test_variable_names_are_accepted(name: str) -> None:
    assert OpenAIPolicyConfig(api_key_env=name).api_key_env == name
