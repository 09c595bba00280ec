"""End to end: the smoke profile through the Prefect flow (each stage `dvc repro`), then DVC alone."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import mlflow
import pytest
import yaml

from tasks.params.nested_keys import flatten
from tasks.runtime.scratch_copy import copy_project, project_env, run_in
from wander.core.process_tree import alive, descendants, kill_descendants

REPO = Path(__file__).resolve().parents[2]


def sh(args: list[str], cwd: Path) -> str:
    """A command in the scratch project; fails the test with its output when it fails."""
    return run_in(cwd, args)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The smoke pipeline, run once through the Prefect flow; returns the root and the flow's output."""
    root = copy_project(tmp_path_factory.mktemp("project"), profile="smoke")
    out = sh([sys.executable, "-m", "flows.pipeline"], root)
    return root, out


@pytest.mark.slow
def test_flow_runs_every_stage_and_leaves_the_artifacts(project):
    root, out = project
    for path in (
        "data/datasets/train.jsonl",
        "data/synth/episodes.jsonl",
        "data/sft/train.jsonl",
        "data/models/base/model.safetensors",
        "data/models/sft/model.safetensors",
        "data/models/grpo/wide/model.safetensors",
        "data/models/grpo/strong/model.safetensors",
        "data/models/grpo/polish/model.safetensors",
        "data/eval/report.md",
        "data/eval/headline_heatmap.png",
        "data/eval/matrix.csv",
    ):
        assert (root / path).is_file(), path
    for stage in (
        "build_model",
        "generate",
        "synthesize",
        "curate",
        "sft",
        "grpo",
        "register",
    ):
        assert json.loads((root / "data/metrics" / f"{stage}.json").read_text()), stage
    # One DVC stage trains tic-tac-toe's curriculum, as its recipe names it: one model and one headline per stage.
    assert list(json.loads((root / "data/metrics/grpo.json").read_text())) == [
        "grpo-wide",
        "grpo-strong",
        "grpo-polish",
    ]
    assert sorted(p.name for p in (root / "data/models/grpo").iterdir()) == ["polish", "strong", "wide"]
    assert "grpo-polish vs teacher" in out and "registered version 1: now champion" in out
    # The log holds the stages' own lines, not DVC's per-stage hints (issue 45), nor the notices of QUIET_ENV.
    for hint in (
        "git add dvc.lock",
        "core.autostage",
        "dvc push",
        "experimental feature",
        "Downloading artifacts",
        "Creating initial MLflow database tables",
    ):
        assert hint not in out, hint
    assert "Running stage 'build_model'" in out and "Updating lock file 'dvc.lock'" in out
    # The summary also gives the champion's exact results and its worst case, as the evaluate stage wrote them.
    matrix = json.loads((root / "data/eval/matrix.json").read_text())
    e = matrix["exact"]["grpo-polish"]["minimax-0"]
    assert f"grpo-polish exact {e['win']:.3f} / {e['draw']:.3f} / {e['loss']:.3f}" in out
    worst = matrix["worst_case"]["grpo-polish"]
    assert f"knows its every move: as X {worst['X']['outcome']}" in out
    assert f"(a strong player): as X {worst['X']['sound']['outcome']}" in out
    # And what each stage added: the headline over every cell with its interval, a model row's exact results.
    assert "each stage: non-loss over every cell [95% interval]" in out
    for row in ("base", "sft", "grpo-wide", "grpo-strong", "grpo-polish", "teacher"):
        o = matrix["policies"][row]["overall"]
        line = f"  {row:<14} {o['non_loss']:.3f} [{o['non_loss_ci_low']:.3f}, {o['non_loss_ci_high']:.3f}]"
        assert line in out, row
    sft = matrix["exact"]["sft"]
    assert f"exact random win {sft['random']['win']:.3f}, random loss {sft['random']['loss']:.3f}" in out

    mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow/mlflow.db'}")
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    parents = [r for r in runs if r.data.tags.get("wander.kind") == "pipeline"]
    assert len(parents) == 1
    children = {
        r.info.run_name for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id
    }
    assert {
        "build_model",
        "generate",
        "synthesize",
        "curate",
        "sft",
        "grpo@wide",
        "grpo@strong",
        "grpo@polish",
        "evaluate",
        "register",
    } <= children
    version = mlflow.MlflowClient().get_model_version_by_alias("wander-tictactoe", "champion")
    assert int(version.version) == 1 and version.tags["wander.parent"] == "grpo-strong"
    # The candidate's model lies in the grpo stage's one output folder: its hash and the path inside it.
    outs = yaml.safe_load((root / "dvc.lock").read_text())["stages"]["grpo"]["outs"]
    [md5] = [out["md5"] for out in outs if out["path"] == "data/models/grpo"]
    assert version.tags["wander.dvc_md5"] == f"{md5}:polish" and md5.endswith(".dir")
    assert version.tags["wander.parent_md5"] == f"{md5}:strong"


READY_SECONDS = 600  # the most a flow may take to reach the moment a test stops it


def start_flow(root: Path, log: Path) -> subprocess.Popen:
    """`python -m flows.pipeline` in the scratch project, leading a process group of its own (a terminal's)."""
    with open(log, "w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "flows.pipeline"],
            cwd=root,
            env=project_env(root),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def running(pid: int, module: str) -> list[int]:
    """The descendants of `pid` running `python -m <module>`."""
    found = []
    for child in descendants(pid):
        with contextlib.suppress(OSError):
            if f"-m\0{module}".encode() in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
    return found


def stop_flow(
    root: Path, log: Path, ready: Callable[[subprocess.Popen], bool], sig: int, group: bool
) -> dict:
    """Run the flow until `ready`, send `sig` (to its process group with `group`), check that every process of the
    run is gone within 15 s and the exit status non-zero; return what the stop looked like."""
    flow = start_flow(root, log)
    try:
        deadline = time.monotonic() + READY_SECONDS
        while not ready(flow):
            assert flow.poll() is None, f"the flow ended before the stop:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "the flow never reached the moment to stop it"
            time.sleep(0.1)
        processes = [flow.pid, *descendants(flow.pid)]  # dvc, the stage, its teacher, Prefect's API server
        start = time.monotonic()
        os.killpg(flow.pid, sig) if group else flow.send_signal(sig)
        code = flow.wait(timeout=15)
        while any(alive(pid) for pid in processes) and time.monotonic() - start < 15:
            time.sleep(0.1)
        seconds = time.monotonic() - start
        left = [pid for pid in processes if alive(pid)]
    finally:
        kill_descendants(flow.pid)
        flow.kill()
        flow.wait()
    assert not left, f"still running 15 s after the stop: {left}\n{log.read_text()[-3000:]}"
    assert code == 128 + sig, log.read_text()[-3000:]
    return {"processes": len(processes), "seconds": seconds}


def last_runs(root: Path) -> dict[str, mlflow.entities.Run]:
    """The newest pipeline run of the scratch project and its stage runs, by run name."""
    mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow/mlflow.db'}")
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list", order_by=["start_time DESC"])
    parent = next(r for r in runs if r.data.tags.get("wander.kind") == "pipeline")
    stages = {r.info.run_name: r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    return {"pipeline": parent, **stages}


def prefect_states(root: Path) -> tuple[str, dict[str, str]]:
    """The newest flow run's state and its task runs' states, from the scratch project's Prefect database."""
    with contextlib.closing(sqlite3.connect(root / ".prefect/prefect.db")) as db:
        flow_id, state = db.execute(
            "select id, state_type from flow_run order by created desc limit 1"
        ).fetchone()
        tasks = dict(db.execute("select name, state_type from task_run where flow_run_id = ?", (flow_id,)))
    return state, tasks


@pytest.mark.slow
@pytest.mark.usefixtures("stages_in_own_processes")  # its assertions read the stage's process tree
def test_sigterm_or_sigint_stop_every_process_of_the_run_and_the_rerun_gives_the_uninterrupted_outputs(
    project, tmp_path
):
    """Stopped during synthesize and during GRPO (SIGTERM to the flow), then SIGINT to its process group: all
    gone within 15 s, runs KILLED and Crashed; the run that finishes gives the uninterrupted run's files."""
    reference, _ = project
    root = copy_project(tmp_path / "stopped", profile="smoke")
    params = (root / "params.yaml").read_text()
    slowed = yaml.safe_load(params)  # a paced teacher, so the stop lands while it plays (pace is no input)
    slowed["synthesize"]["requests_per_second"] = 20.0
    (root / "params.yaml").write_text(yaml.safe_dump(slowed, sort_keys=False))
    journal = root / "data/work/synthesize"

    def playing(flow: subprocess.Popen) -> bool:
        return any(p.read_text().count("\n") >= 16 for p in journal.glob("*.jsonl"))

    def training(flow: subprocess.Popen) -> bool:
        # A GRPO curriculum stage's run is open (a fixed delay after its process starts was too short on a busy
        # machine); any of them, since a rerun resumes wide from its checkpoint and may leave it within a poll.
        if not running(flow.pid, "tasks.grpo"):
            return False
        try:
            with contextlib.closing(sqlite3.connect(root / "mlflow/mlflow.db", timeout=1)) as db:
                found = db.execute("select 1 from runs where name like 'grpo@%' and status = 'RUNNING'")
                return found.fetchone() is not None
        except sqlite3.OperationalError:  # the store is being created or written: look again
            return False

    stops = {"synthesize": stop_flow(root, tmp_path / "1.log", playing, signal.SIGTERM, group=False)}
    assert (
        "a rerun resumes from there" in (tmp_path / "1.log").read_text()
    )  # the stage's last words are shown
    assert last_runs(root)["pipeline"].info.status == "KILLED"
    state, tasks = prefect_states(root)
    assert state == "CRASHED" and tasks["synthesize"] == "CRASHED", (state, tasks)
    assert list(journal.glob("*.jsonl")), "the journal of the stopped synthesis is kept"

    (root / "params.yaml").write_text(params)
    stops["grpo"] = stop_flow(root, tmp_path / "2.log", training, signal.SIGTERM, group=False)
    runs = last_runs(root)
    assert runs["pipeline"].info.status == "KILLED" and runs["synthesize"].info.status == "FINISHED"
    assert re.search(r"48 episodes of train: (16|32) already journaled", (tmp_path / "2.log").read_text())

    stops["sigint"] = stop_flow(root, tmp_path / "3.log", training, signal.SIGINT, group=True)
    assert last_runs(root)["pipeline"].info.status == "KILLED"

    run_in(root, [sys.executable, "-m", "flows.pipeline"])
    # A stopped stage ends its run KILLED itself, or, killed after the grace period, the next stage to start does.
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    assert {r.info.status for r in runs} == {"FINISHED", "KILLED"}
    assert {"synthesize", "grpo@wide", "pipeline"} <= {
        r.info.run_name for r in runs if r.info.status == "KILLED"
    }
    for path in (
        "data/synth/episodes.jsonl",
        "data/sft/train.jsonl",
        *(f"data/models/{m}/model.safetensors" for m in ("sft", "grpo/wide", "grpo/strong", "grpo/polish")),
        "data/eval/matrix.csv",
    ):
        assert (root / path).read_bytes() == (reference / path).read_bytes(), path
    assert all(stop["processes"] >= 4 for stop in stops.values()), (
        stops
    )  # flow, API server, dvc, stage (+ teacher)
    print(stops)


@pytest.mark.slow
def test_with_env_url_synthesize_grpo_and_evaluate_step_the_served_env_and_give_the_local_results(
    project, tmp_path
):
    """The flow's run again with `env.url` set: the same episodes, weights and matrix, played on a server."""
    import shlex
    import time
    import urllib.request

    from tasks.params.load import load_params
    from tasks.runtime.episodes import serve_command

    root, _ = project
    url = f"http://127.0.0.1:{free_port()}"
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["env"]["url"] = url
    # Outputs go to a folder of their own (the other tests keep the flow's); inputs are the flow's.
    out = tmp_path / "remote"
    for key in ("episodes", "models", "metrics", "details", "eval", "work"):
        params["layout"][key] = str(out / key)
    shutil.copytree(root / "data/models/sft", out / "models/sft")
    params["evaluate"]["out_dir"] = str(out / "eval")  # the rows follow the layout: out/models/grpo/<stage>
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(params, sort_keys=False))

    # The server the stages' error message says to start, as a separate process.
    command = shlex.split(serve_command(load_params(params_file).env))
    server_log = tmp_path / "server.log"
    log = open(server_log, "w")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / command[0]), *command[1:]],
        cwd=root,
        env=project_env(root),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/health", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "wander env serve did not start"
                time.sleep(0.5)
        sessions = {}  # stage -> episode sessions the server accepted while it ran
        for stage, *options in [["synthesize"], ["grpo"], ["evaluate"]]:
            before = server_log.read_text().count('"WebSocket /ws" [accepted]')
            args = ["-m", f"tasks.{stage}", *options, "--params", str(params_file), "--no-mlflow"]
            assert "episodes of tictactoe play on the server at" in sh([sys.executable, *args], root)
            sessions[" ".join([stage, *options])] = (
                server_log.read_text().count('"WebSocket /ws" [accepted]') - before
            )
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()

    assert (out / "episodes/episodes.jsonl").read_bytes() == (root / "data/synth/episodes.jsonl").read_bytes()
    for stage in ("wide", "strong", "polish"):
        model = f"grpo/{stage}/model.safetensors"
        assert (out / "models" / model).read_bytes() == (root / "data/models" / model).read_bytes(), stage
    assert (out / "eval/matrix.csv").read_text() == (root / "data/eval/matrix.csv").read_text()
    # One session per teacher game and per matrix game (8 rows x 5 opponents x 2 sides x 2 games); GRPO's branches.
    assert sessions["synthesize"] == 48 and sessions["evaluate"] == 160, sessions
    assert all(n > 0 for n in sessions.values()), sessions


@pytest.mark.slow
def test_dvc_repro_then_does_nothing_and_an_eval_param_reruns_only_evaluate_and_register(project):
    root, _ = project
    assert "Data and pipelines are up to date." in sh(["dvc", "repro"], root)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["evaluate"]["seed"] = 1
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = sh(["dvc", "repro"], root)
    ran = [line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")]
    assert ran == ["evaluate", "register"]
    sh(["git", "add", "-A"], root)
    sh(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "eval seed 1"], root)
    exp = sh(["dvc", "exp", "run", "-n", "games3", "-S", "evaluate.games=3"], root)
    assert "Running stage 'evaluate'" in exp and "Running stage 'sft'" not in exp
    assert "games3" in sh(["dvc", "exp", "show", "--csv"], root)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def deployed(project) -> dict:
    """`prefect deploy`, a process worker, then the manual pipeline, a retrain cancelled mid-stage and the retrain
    from the champion (seed 7) on params.yaml's own gates (`register.baseline: teacher`; the smoke profile's is null),
    through a local Prefect server; what the tests check of it."""
    import time
    import urllib.request

    root, _ = project
    port = free_port()
    env = project_env(root)
    env.update(
        PREFECT_HOME=str(root / ".prefect-server"),
        PREFECT_API_URL=f"http://127.0.0.1:{port}/api",
        PREFECT_WORKER_QUERY_SECONDS="2",
        WANDER_PROJECT_DIR=str(root),
    )

    def prefect(*args: str, timeout: float = 1200) -> str:
        done = subprocess.run(
            ["prefect", "--no-prompt", *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, (
            f"prefect {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
        return done.stdout + done.stderr

    found: dict = {}
    params_file = root / "params.yaml"
    smoke_params = params_file.read_text()
    logs = open(root / "prefect-services.log", "w")
    server = subprocess.Popen(
        ["prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        cwd=root,
        env=env,
        stdout=logs,
        stderr=subprocess.STDOUT,
    )
    worker = None
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "prefect server did not start"
                time.sleep(1)
        prefect("work-pool", "create", "wander", "--type", "process")
        found["deployed"] = prefect("deploy", "--name", "manual", "--name", "retrain")  # the one-machine ones
        worker = subprocess.Popen(
            ["prefect", "worker", "start", "--pool", "wander"],
            cwd=root,
            env=env,
            stdout=logs,
            stderr=subprocess.STDOUT,
        )
        prefect("deployment", "run", "wander-pipeline/manual", "--watch")
        # A deployment run cancelled (as from the UI) while a stage runs: nothing of it keeps running.
        started = prefect("deployment", "run", "wander-retrain/retrain", "--param", "seed=8")
        flow_run = re.search(r"UUID: ([0-9a-f-]{36})", started).group(1)
        deadline = time.monotonic() + 600
        while not (running(worker.pid, "tasks.generate") or running(worker.pid, "tasks.grpo")):
            assert time.monotonic() < deadline and worker.poll() is None, "the retrain never started a stage"
            time.sleep(0.2)
        processes = descendants(worker.pid)  # the flow run's process, its stage and what that started
        prefect("flow-run", "cancel", flow_run)
        cancelled = (
            time.monotonic()
        )  # the worker looks for cancellations every 2 s (PREFECT_WORKER_QUERY_SECONDS)
        while any(alive(pid) for pid in processes) or "CANCELLED" not in prefect(
            "flow-run", "inspect", flow_run
        ):
            if time.monotonic() - cancelled > 30:
                break
            time.sleep(1)
        found["left_after_cancel"] = [pid for pid in processes if alive(pid)]
        found["cancelled_state"] = "CANCELLED" in prefect("flow-run", "inspect", flow_run)
        found["versions_before"] = len(registry(root).search_model_versions("name='wander-tictactoe'"))
        # Issue 44: on params.yaml's own `register.baseline` the retrain died in register, whose teacher gate found
        # no teacher row, after creating a version.
        params = yaml.safe_load(smoke_params)
        params["register"]["baseline"] = yaml.safe_load((REPO / "params.yaml").read_text())["register"][
            "baseline"
        ]
        assert params["register"]["baseline"] == "teacher"
        params_file.write_text(yaml.safe_dump(params, sort_keys=False))
        prefect("deployment", "run", "wander-retrain/retrain", "--param", "seed=7", "--watch")
    finally:
        params_file.write_text(smoke_params)
        for proc in (worker, server):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:  # a busy machine can hold up Prefect's graceful shutdown
                    proc.kill()
                    proc.wait()
        logs.close()
    found["worker_log"] = (
        root / "prefect-services.log"
    ).read_text()  # the flow runs' lines, through the worker
    return found


def registry(root: Path) -> mlflow.MlflowClient:
    """MLflow's client on the scratch project's store."""
    mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow/mlflow.db'}")
    return mlflow.MlflowClient()


@pytest.mark.slow
def test_deployments_run_through_a_local_prefect_server_and_worker(project, deployed):
    """The manual pipeline and the retrain from the champion run as deployments; a cancelled one leaves nothing."""
    root, _ = project
    assert (
        "wander-pipeline/manual" in deployed["deployed"] and "wander-retrain/retrain" in deployed["deployed"]
    )
    assert deployed["left_after_cancel"] == [], "30 s after the cancel, still running"
    assert deployed["cancelled_state"]
    retrained = json.loads((root / "data/work/retrain/seed-7/metrics/register.json").read_text())
    assert retrained["version"] == deployed["versions_before"] + 1
    client = registry(root)
    champion = int(client.get_model_version_by_alias("wander-tictactoe", "champion").version)
    assert (champion == retrained["version"]) == retrained["promoted"]
    version = client.get_model_version("wander-tictactoe", str(retrained["version"]))
    assert version.tags["wander.promoted"] == str(retrained["promoted"]).lower()


@pytest.mark.slow
def test_the_retrain_runs_on_the_default_gates_and_a_failed_register_leaves_the_registry_as_it_was(
    project, deployed
):
    """Issue 44: the deployment's retrain ran on params.yaml's own gates (the teacher row is played, a version is
    registered); then a gate whose row the matrix lacks is refused before register writes anything."""
    root, _ = project
    client = registry(root)

    def versions() -> list[int]:
        return sorted(int(v.version) for v in client.search_model_versions("name='wander-tictactoe'"))

    work = root / "data/work/retrain/seed-7"
    derived = yaml.safe_load((work / "params.yaml").read_text())
    assert derived["register"]["baseline"] == "teacher"
    played = {row.split(",")[0] for row in (work / "eval/matrix.csv").read_text().splitlines()[1:]}
    assert {"champion", "candidate", "teacher"} <= played
    result = json.loads((work / "metrics/register.json").read_text())
    assert (
        f"retrain seed 7: version {result['version']}, promoted={result['promoted']}"
        in deployed["worker_log"]
    )
    assert versions()[-1] == result["version"] == deployed["versions_before"] + 1
    champion = int(client.get_model_version_by_alias("wander-tictactoe", "champion").version)
    assert (champion == result["version"]) == result["promoted"]

    # A gate whose row the matrix lacks: register refuses before it writes anything.
    before = versions()
    derived["register"]["baseline"] = "nobody"
    (work / "params.yaml").write_text(yaml.safe_dump(derived, sort_keys=False))
    with pytest.raises(RuntimeError, match="no rows for policy 'nobody'"):
        sh([sys.executable, "-m", "tasks.register", "--params", str(work / "params.yaml")], root)
    assert versions() == before
    assert int(client.get_model_version_by_alias("wander-tictactoe", "champion").version) == champion


@pytest.mark.slow
def test_dvc_metrics_show_the_evaluation_headline_not_the_whole_matrix(project):
    root, _ = project
    table = sh(["dvc", "metrics", "show", "data/eval/metrics.json"], root).splitlines()
    columns = table[0].split()[1:]  # after "Path"
    # Candidate and baseline: overall non-loss and invalid, wins and losses vs random, losses vs minimax-0, and
    # the candidate's exact results; it was thousands of columns.
    assert len(columns) == 13 and len(table[0]) < 600
    assert {"grpo-polish.exact.minimax-0.loss", "grpo-polish.random.win", "teacher.all.non_loss"} <= set(
        columns
    )
    matrix = json.loads((root / "data/eval/matrix.json").read_text())
    assert set(matrix["policies"]) >= {
        "base",
        "sft",
        "grpo-wide",
        "grpo-strong",
        "grpo-polish",
        "teacher",
    }  # the rest, as outs


@pytest.mark.slow
def test_dvc_metrics_are_a_short_flat_headline_and_the_details_hold_the_breakdown(project):
    root, _ = project
    shown = json.loads(sh(["dvc", "metrics", "show", "--json"], root))[""]["data"]
    values = {path: flatten(found["data"]) for path, found in shown.items()}
    assert "data/eval/metrics.json" in values and "data/metrics/synthesize.json" in values
    # Every number of every metrics file is a column of `dvc metrics show` / `dvc exp show`; the per-stratum
    # breakdowns made it ~90 more than the evaluation's (then 40, now 13).
    assert sum(len(v) for v in values.values()) <= 80, {p: len(v) for p, v in values.items()}
    for stage in ("generate", "synthesize", "curate"):
        headline = json.loads((root / f"data/metrics/{stage}.json").read_text())
        assert len(headline) <= 8 and all(isinstance(v, (int, float)) for v in headline.values()), stage
    assert not any("details" in path for path in shown)  # the breakdown is not a metric...
    assert "dropped" not in sh(["dvc", "metrics", "show", "data/metrics"], root)  # nor in the metrics folder
    lock = yaml.safe_load((root / "dvc.lock").read_text())["stages"]
    details = {}
    for stage in ("generate", "synthesize", "curate"):
        path = f"data/details/{stage}.json"
        assert path in [out["path"] for out in lock[stage]["outs"]], stage  # ...but an out of its stage
        details[stage] = json.loads((root / path).read_text())
    assert sum(details["generate"]["splits"]["train"]["per_stratum"].values()) == 48
    assert sum(s["episodes"] for s in details["synthesize"]["per_stratum"].values()) == 48
    curated = details["curate"]
    assert curated["input"] == curated["kept"] + sum(curated["dropped"].values())
    assert json.loads((root / "data/metrics/curate.json").read_text())["kept"] == curated["kept"]


@pytest.mark.slow
def test_a_changed_sft_learning_rate_retrains_every_grpo_stage_a_changed_last_stage_only_itself(project):
    """Checkpoints left by the finished runs must not be resumed by the changed ones (weights would not move). The
    rate is null in params.yaml, the env's recipe: DVC sees a change of the recipe file as well as a set value.
    Then a change of the last curriculum stage alone: the grpo stage reruns, and keeps the stages before it."""
    root, _ = project
    models = ("sft", "grpo/wide", "grpo/strong", "grpo/polish")
    before = {m: (root / "data/models" / m / "model.safetensors").read_bytes() for m in models}
    params = yaml.safe_load((root / "params.yaml").read_text())
    recipe_file = root / "envs/tictactoe/recipe.yaml"
    recipe = recipe_file.read_text()
    rate = yaml.safe_load(recipe)["sft"]["learning_rate"]
    assert params["sft"]["learning_rate"] is None and rate > 0
    recipe_file.write_text(recipe.replace(str(rate), str(rate * 10)))
    status = json.loads(sh(["dvc", "status", "--json", "sft"], root))
    assert {"changed deps": {"envs/tictactoe/recipe.yaml": "modified"}} in status["sft"], status
    recipe_file.write_text(recipe)
    params["sft"]["learning_rate"] = rate * 10  # the value set in params.yaml wins over the recipe
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = sh(["dvc", "repro", "grpo"], root)  # only the training chain: keep the budget small
    ran = [line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")]
    assert ran == ["sft", "grpo"]
    for model in models:
        assert (root / "data/models" / model / "model.safetensors").read_bytes() != before[model], model
    assert json.loads((root / "data/metrics/sft.json").read_text())["train_loss"] > 0
    assert not list((root / "data/work").rglob("checkpoint-*"))  # a finished run leaves nothing to resume

    # The env's curriculum set in params.yaml, its polish stage sampling cooler: DVC reruns grpo (its section
    # changed; the recipe file is also sft's dep), which keeps wide and strong (the same inputs), trains polish.
    trained = {m: (root / "data/models" / m / "model.safetensors").read_bytes() for m in models}
    stage_file = root / "data/models/grpo/polish/grpo_stage.json"
    before_polish = json.loads(stage_file.read_text())["fingerprint"]
    params["grpo"]["stages"] = yaml.safe_load(recipe)["grpo"]["stages"]
    params["grpo"]["stages"]["polish"]["temperature"] = 0.9
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = sh(["dvc", "repro", "grpo"], root)
    assert [line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")] == ["grpo"]
    assert "grpo@wide: kept" in out and "grpo@strong: kept" in out and "grpo@polish: 2 steps in" in out
    for model in ("sft", "grpo/wide", "grpo/strong"):
        assert (root / "data/models" / model / "model.safetensors").read_bytes() == trained[model], model
    # Polish trained again, on new inputs (the smoke's two steps may leave its weights where they were).
    assert json.loads(stage_file.read_text())["fingerprint"] != before_polish
    assert json.loads((root / "data/metrics/grpo.json").read_text())["grpo-polish"]["steps"] == 2
