"""The UI's reader of the tracking store (tasks/runtime/tracking_reader.py), on stores filled with real MLflow calls
(the stages' own `pipeline_run`/`stage_run`, `register`'s pyfunc model): the registry's versions with their tags
and aliases, an alias's checkpoint (here, or downloaded through MLflow into the project's work folder), the newest
pipeline's curves. Its answers are checked against the sqlite reads `wander ui` made before it (kept here as
`sqlite_reads`), on the project's sqlite store and on a real `mlflow server` (slow)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import mlflow
import mlflow.pyfunc
import pytest

from tasks.runtime import registered_model, tracking
from tasks.runtime.tracking import PARENT_RUN_ENV, pipeline_run, stage_run
from tasks.runtime.tracking_reader import MlflowRunStore
from wander.ui.tracking_store import StageCurves, TrackingStoreError, Version

MODEL = "wander-reader-test"
SFT = "data/models/sft"  # kept: its version's checkpoint is read in place
POLISH = "data/models/polish"  # removed after registering: its version's checkpoint is downloaded


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch):
    """No tracking URI, parent run or experiment from outside; MLflow's URI (and its variable) put back after."""
    for name in (PARENT_RUN_ENV, tracking.EXPERIMENT_ENV):
        monkeypatch.delenv(name, raising=False)
    previous = os.environ.get("MLFLOW_TRACKING_URI")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    mlflow.set_tracking_uri(None)
    yield monkeypatch
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_tracking_uri(previous)


def checkpoint(root: Path, folder: str, marker: str) -> Path:
    """A stand-in checkpoint folder (a config.json naming it)."""
    path = root / folder
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"marker": marker}), encoding="utf-8")
    return path


def register(root: Path, folder: str, parent: str) -> str:
    """Register `folder` as `register` does (a pyfunc model holding it as its `checkpoint`); its version."""
    with stage_run("register", root=root):
        info = mlflow.pyfunc.log_model(
            name="model",
            python_model=registered_model.__file__,
            artifacts={"checkpoint": str(root / folder)},
            pip_requirements=["mlflow"],  # named: inferring them costs seconds
        )
    tags = {"wander.checkpoint": folder, "wander.parent": parent, "wander.promoted": "true"}
    return mlflow.register_model(info.model_uri, MODEL, tags=tags).version


def fill(root: Path) -> None:
    """Two pipeline runs (the newest one's curves are shown), two registered versions, three aliases, in the store
    the stages of `root` log to."""
    with pipeline_run(root=root), stage_run("sft", root=root):
        for step in range(3):
            mlflow.log_metric("loss", 9.0, step=step)  # an older pipeline's: never shown
    with pipeline_run(root=root):
        with stage_run("sft", root=root):
            for step in range(3):
                mlflow.log_metrics({"loss": 2.0 / (step + 1), "learning_rate": 0.1 * step}, step=step)
            mlflow.log_metric("eval_loss", 1.5, step=2)  # one step: no curve
            mlflow.log_metrics({"curve/seconds": 3.0, "accuracy": 0.5}, step=0)  # never curves
            mlflow.log_metrics({"curve/seconds": 4.0, "accuracy": 0.6}, step=1)
        with stage_run("grpo", root=root):
            for step, reward in ((0, 0.1), (1, 0.2), (1, 0.3), (2, 0.25)):  # step 1 twice: in logging order
                mlflow.log_metric("reward", reward, step=step)
                time.sleep(0.002)  # distinct timestamps: the order is theirs
            mlflow.log_metrics({"curve/win": 0.0}, step=0)
            mlflow.log_metrics({"curve/win": 0.5}, step=10)
        with stage_run("evaluate", root=root):
            mlflow.log_metric("win", 0.4)  # no per-step metric: no curves
    checkpoint(root, SFT, "sft")
    checkpoint(root, POLISH, "polish")
    first, second = register(root, SFT, "base"), register(root, POLISH, "sft")
    client = mlflow.MlflowClient()
    client.set_registered_model_alias(MODEL, "old", first)
    for alias in ("candidate", "champion"):
        client.set_registered_model_alias(MODEL, alias, second)
    shutil.rmtree(root / POLISH)  # trained on another machine: only the registry has it


def sqlite_reads(db: Path, name: str) -> tuple[list[Version], list[StageCurves]]:
    """What `wander ui` read of MLflow's sqlite file before the reader (its queries, aliases sorted)."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
        versions = {
            int(v): Version(name, int(v), {})
            for (v,) in con.execute(
                "select version from model_versions where name = ? order by version desc", (name,)
            )
        }
        for v, key, value in con.execute(
            "select version, key, value from model_version_tags where name = ?", (name,)
        ):
            versions[int(v)].tags[key] = value
        for v, alias in con.execute(
            "select version, alias from registered_model_aliases where name = ?", (name,)
        ):
            versions[int(v)].aliases = sorted([*versions[int(v)].aliases, alias])
        parent = con.execute(
            "select t.value from runs r join tags t on t.run_uuid = r.run_uuid and t.key = 'mlflow.parentRunId' "
            "where r.lifecycle_stage = 'active' order by r.start_time desc limit 1"
        ).fetchone()
        stages = con.execute(
            "select r.run_uuid, r.name from runs r join tags t on t.run_uuid = r.run_uuid "
            "and t.key = 'mlflow.parentRunId' and t.value = ? order by r.start_time",
            parent,
        ).fetchall()
        curves = []
        for run_id, stage in stages:
            series: dict[str, list[tuple[int, float]]] = {}
            for key, step, value in con.execute(
                "select key, step, value from metrics where run_uuid = ? order by key, step, timestamp",
                (run_id,),
            ):
                curve_keys = ("loss", "eval_loss", "reward", "reward_std", "entropy", "learning_rate")
                if key in curve_keys or (key.startswith("curve/") and key != "curve/seconds"):
                    series.setdefault(key, []).append((int(step), float(value)))
            series = {k: v for k, v in series.items() if len({s for s, _ in v}) > 1}
            if series:
                curves.append(StageCurves(stage, series))
    return list(versions.values()), curves


def assert_answers(store: MlflowRunStore, db: Path) -> None:
    """The reader's versions and curves: as expected, and as the sqlite reads of `db` give them."""
    versions, curves = store.versions(MODEL), store.curves()
    assert (versions, curves) == sqlite_reads(db, MODEL)
    assert [
        (v.version, v.aliases, v.tags["wander.checkpoint"], v.tags["wander.parent"]) for v in versions
    ] == [
        (2, ["candidate", "champion"], POLISH, "sft"),
        (1, ["old"], SFT, "base"),
    ]
    assert curves == [
        StageCurves(
            "sft", {"learning_rate": [(0, 0.0), (1, 0.1), (2, 0.2)], "loss": [(0, 2.0), (1, 1.0), (2, 2 / 3)]}
        ),
        StageCurves(
            "grpo", {"curve/win": [(0, 0.0), (10, 0.5)], "reward": [(0, 0.1), (1, 0.2), (1, 0.3), (2, 0.25)]}
        ),
    ]
    assert store.versions("no-such-model") == [] and store.checkpoint("no-such-model", "champion") is None
    assert store.checkpoint(MODEL, "no-such-alias") is None


def assert_downloaded(store: MlflowRunStore, root: Path) -> None:
    """The champion's checkpoint, not on this machine, downloaded once into the project's work folder."""
    folder = store.checkpoint(MODEL, "champion")
    assert folder is not None and folder.is_relative_to(root.resolve() / "mlflow/downloads" / MODEL / "2")
    assert json.loads((folder / "config.json").read_text()) == {"marker": "polish"}
    assert [p.name for p in folder.parents[2].iterdir()] == ["2"]  # no partial download left beside it
    stamp = (folder / "config.json").stat().st_mtime_ns
    assert (
        store.checkpoint(MODEL, "champion") == folder and (folder / "config.json").stat().st_mtime_ns == stamp
    )


def test_the_reader_answers_as_the_sqlite_reads_did_on_the_projects_store(tmp_path, clean):
    fill(tmp_path)
    store = MlflowRunStore(tmp_path)  # the project's store: MLFLOW_TRACKING_URI is unset
    assert store.uri == tracking.project_store(tmp_path)
    assert_answers(store, tmp_path / "mlflow/mlflow.db")
    # A version whose checkpoint is here is read in place, as its tag says; the champion's is downloaded.
    assert store.checkpoint(MODEL, "old") == tmp_path.resolve() / SFT
    assert_downloaded(store, tmp_path)


def test_no_store_yet_is_read_as_empty_and_not_created(tmp_path, clean):
    store = MlflowRunStore(tmp_path)
    assert (
        store.versions(MODEL) == [] and store.curves() == [] and store.checkpoint(MODEL, "champion") is None
    )
    assert not (tmp_path / "mlflow").exists()


def test_a_server_that_does_not_answer_is_one_line(tmp_path, clean):
    clean.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # at once: the default backs off for minutes
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once the socket is closed
    store = MlflowRunStore(tmp_path, f"http://user:secret@127.0.0.1:{port}")
    with pytest.raises(
        TrackingStoreError, match=rf"^could not read the tracking store at http://\*\*\*@127.0.0.1:{port}: "
    ):
        store.versions(MODEL)
    assert "secret" not in store.location


@pytest.mark.slow
def test_the_same_reader_reads_an_mlflow_server(tmp_path, clean):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server_dir, trainer, ui = tmp_path / "server", tmp_path / "trainer", tmp_path / "ui"
    for folder in (server_dir, trainer, ui):
        folder.mkdir()
    command = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    command += ["--backend-store-uri", f"sqlite:///{server_dir / 'mlflow.db'}"]
    command += ["--artifacts-destination", str(server_dir / "artifacts")]
    # Without its job runner (seven more processes importing MLflow), as services/http_servers.py starts it.
    quiet = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    server = subprocess.Popen(
        command, cwd=server_dir, env=quiet, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, server.stderr.read().decode()[-2000:]
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, "mlflow server did not answer in 120 s"
            time.sleep(0.5)
        clean.setenv("MLFLOW_TRACKING_URI", url)  # as a team's machines are pointed at it
        fill(trainer)
        store = MlflowRunStore(ui)  # another machine: no checkpoint of the trainer's is here
        assert store.uri == url
        assert_answers(store, server_dir / "mlflow.db")
        assert_downloaded(store, ui)
        assert not (ui / "mlflow/mlflow.db").exists()  # the UI's machine has no store of its own
    finally:
        server.terminate()
        server.wait(timeout=30)
