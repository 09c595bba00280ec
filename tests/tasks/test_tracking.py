"""MLflow tracking: a sqlite store under the project root, one parent run, one nested run per stage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
import yaml

from tasks.params.nested_keys import flatten
from tasks.runtime import tracking
from tasks.runtime.tracking import (
    PARENT_RUN_ENV,
    log_metrics,
    pipeline_run,
    stage_run,
    write_metrics,
)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project root; MLflow's tracking URI (and the variable MLflow exports with it) put back after."""
    monkeypatch.delenv(PARENT_RUN_ENV, raising=False)
    previous = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(None)  # MLflow's default until a test sets one (None also clears the variable)
    yield tmp_path
    while mlflow.active_run() is not None:
        mlflow.end_run()
    # Not get_tracking_uri(): it returns the default resolved against the cwd of the moment, pinning it.
    mlflow.set_tracking_uri(previous)


def runs(root: Path) -> dict[str, mlflow.entities.Run]:
    """Every run of the store under `root`, by run name."""
    client = mlflow.MlflowClient(tracking.tracking_uri(root))
    experiment = client.get_experiment_by_name(tracking.DEFAULT_EXPERIMENT)
    return {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}


def test_store_is_sqlite_under_the_root_with_artifacts_beside_it(root: Path) -> None:
    assert tracking.tracking_uri(root) == f"sqlite:///{root.resolve()}/mlflow/mlflow.db"
    tracking.setup(root)
    # MLflow exports the URI, so stage subprocesses log to the same store as their parent.
    assert os.environ["MLFLOW_TRACKING_URI"] == tracking.tracking_uri(root)
    experiment = mlflow.MlflowClient().get_experiment_by_name("wander")
    assert experiment.artifact_location == (root / "mlflow" / "artifacts").resolve().as_uri()
    assert (root / "mlflow" / "mlflow.db").exists()


def test_stage_runs_nest_under_the_pipeline_run(root: Path) -> None:
    with pipeline_run("pipeline", {"profile": "smoke"}, root=root) as parent_id:
        assert os.environ[PARENT_RUN_ENV] == parent_id
        with stage_run("generate", {"generate": {"num_train": 48}}, root=root) as run:
            write_metrics(
                root / "metrics.json", {"episodes": 80, "splits": {"train": {"episodes": 48}}, "ok": True}
            )
            assert tracking.log_artifact(root / "metrics.json", "metrics")
            child_id = run.info.run_id
    assert PARENT_RUN_ENV not in os.environ  # restored on exit
    found = runs(root)
    child = found["generate"]
    assert child.info.run_id == child_id and child.data.tags["mlflow.parentRunId"] == parent_id
    assert child.data.tags["wander.stage"] == "generate"
    assert child.data.params == {"generate/num_train": "48"}
    assert child.data.metrics == {"episodes": 80.0, "splits/train/episodes": 48.0}  # booleans are not metrics
    assert found["pipeline"].data.params == {"profile": "smoke"}
    artifacts = mlflow.MlflowClient().list_artifacts(child_id, "metrics")
    assert [a.path for a in artifacts] == ["metrics/metrics.json"]
    assert json.loads((root / "metrics.json").read_text())["splits"] == {"train": {"episodes": 48}}


def test_a_stage_process_nests_under_the_parent_id_it_is_given(root: Path, params_at) -> None:
    params = params_at(Path("."))  # relative paths: the stage runs in `root`
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    with pipeline_run("pipeline", root=root) as parent_id:
        env = {**os.environ, PARENT_RUN_ENV: parent_id}
        env.pop("MLFLOW_RUN_ID", None)
        done = subprocess.run(
            [sys.executable, "-m", "tasks.generate"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
    child = runs(root)["generate"]
    assert child.data.tags["mlflow.parentRunId"] == parent_id
    assert child.info.status == "FINISHED"
    assert child.data.metrics["episodes"] == 80.0 and child.data.params["generate/num_train"] == "48"
    assert [a.path for a in mlflow.MlflowClient().list_artifacts(child.info.run_id, "validation")] == [
        "validation/validation.json"
    ]
    assert (root / "data" / "metrics" / "generate.json").exists()


def test_standalone_stage_run_and_failed_stage_status(root: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"), stage_run("curate", root=root):
        raise RuntimeError("boom")
    run = runs(root)["curate"]
    assert "mlflow.parentRunId" not in run.data.tags and run.info.status == "FAILED"


def test_logging_outside_a_run_does_nothing(root: Path) -> None:
    assert mlflow.active_run() is None
    assert log_metrics({"a": 1}) is False
    assert tracking.log_artifact(root, "x") is False and tracking.set_tags({"a": 1}) is False
    write_metrics(root / "m.json", {"a": 1})  # the DVC metrics file is written regardless
    assert json.loads((root / "m.json").read_text()) == {"a": 1}


def test_flatten_joins_nested_keys() -> None:
    assert flatten({"a": {"b": 1, "c": {"d": 2}}, "e": [1], "f": {}}) == {
        "a/b": 1,
        "a/c/d": 2,
        "e": [1],
        "f": {},
    }


def standalone_env() -> dict[str, str]:
    """This process's environment without what would point a child's runs elsewhere: it logs under its root."""
    dropped = (PARENT_RUN_ENV, "MLFLOW_RUN_ID", "MLFLOW_TRACKING_URI")
    return {k: v for k, v in os.environ.items() if k not in dropped}


def test_a_run_whose_process_was_killed_is_marked_killed_on_the_next_start(root: Path) -> None:
    code = (
        "import sys, time\n"
        "from tasks.runtime.tracking import stage_run\n"
        "with stage_run('curate', root=sys.argv[1]):\n"
        "    print('started', flush=True)\n"
        "    time.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(root)], stdout=subprocess.PIPE, text=True, env=standalone_env()
    )
    try:
        assert proc.stdout.readline().strip() == "started"
    finally:
        proc.kill()  # SIGKILL: the run cannot end itself
        proc.wait()
    assert runs(root)["curate"].info.status == "RUNNING"
    with stage_run("generate", root=root):
        pass
    killed = runs(root)["curate"]
    assert killed.info.status == "KILLED" and killed.info.end_time is not None
    assert killed.data.tags["wander.end"] == f"process {proc.pid} ended without closing this run"
    assert runs(root)["generate"].info.status == "FINISHED"


def test_a_stop_inside_an_mlflow_write_lets_it_finish_and_the_run_ends_killed_at_once(root: Path) -> None:
    # A stop raised inside the write's transaction left the SQLite lock held; recording the run KILLED then waited
    # for it (MLflow's busy timeout, 20 s), past a stage's grace.
    code = (
        "import os, signal, sys, time\n"
        "from sqlalchemy import event\n"
        "from sqlalchemy.engine import Engine\n"
        "from tasks.runtime.tracking import log_metrics, stage_run\n"
        "from wander.core.process_tree import Stopped, stop_on_signals\n"
        "sent = []\n"
        "def inside_the_write(conn, cursor, statement, *args):\n"
        "    if 'INSERT INTO metrics' in statement and not sent:\n"
        "        sent.append(time.monotonic())\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        time.sleep(0.2)  # the handler runs here, in the middle of the transaction\n"
        "event.listen(Engine, 'after_cursor_execute', inside_the_write)\n"
        "try:\n"
        "    with stop_on_signals(grace=60), stage_run('train', root=sys.argv[1]):\n"
        "        log_metrics({'loss': 0.5}, step=1)\n"
        "        time.sleep(60)\n"
        "except Stopped as stop:\n"
        "    print(f'{time.monotonic() - sent[0]:.1f}', flush=True)\n"
        "    sys.exit(stop.exit_code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(root)],
        capture_output=True,
        text=True,
        env=standalone_env(),
        timeout=120,
    )
    assert done.returncode == 128 + 15, done.stderr
    assert float(done.stdout) < 5.0, f"the stop took {done.stdout.strip()} s to unwind"
    run = runs(root)["train"]
    assert run.info.status == "KILLED" and run.data.metrics["loss"] == 0.5
