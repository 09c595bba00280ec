"""The stage server runs a stage command as the command's own process would, and stops it the same ways."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks.runtime.stage_server import KILL_AFTER, SERVER_ENV
from wander.core.process_tree import alive

REPO = Path(__file__).resolve().parents[2]
# A stage of the copy's own (the server's code has no such module): it reports what it runs in, then exits with
# --exit, or with `sleep` starts a helper and waits for a stop, or with `killed` ends by SIGKILL.
PROBE = """
import json, os, subprocess, sys, time
from wander.core.process_tree import stop_on_signals, Stopped

report = {"pid": os.getpid(), "ppid": os.getppid(), "cwd": os.getcwd(), "argv": sys.argv[1:],
          "probe_env": os.environ.get("PROBE"), "server_env": os.environ.get("WANDER_STAGE_SERVER"),
          "torch_loaded": "torch" in sys.modules, "file": __file__}
if "sleep" in sys.argv:
    helper = subprocess.Popen(["sleep", "600"])
    report["helper"] = helper.pid
print(json.dumps(report), flush=True)
print("to stderr", file=sys.stderr)
if "sleep" in sys.argv:
    try:
        with stop_on_signals():
            time.sleep(600)
    except Stopped as e:
        print("stopped", flush=True)
        helper.terminate()
        sys.exit(e.exit_code)
if "killed" in sys.argv:
    os.kill(os.getpid(), 9)
sys.exit(int(sys.argv[sys.argv.index("--exit") + 1]) if "--exit" in sys.argv else 0)
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project whose `tasks` package is a copy of ours plus the probe stage."""
    root = tmp_path_factory.mktemp("project")
    shutil.copytree(REPO / "tasks", root / "tasks", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "tasks/probe.py").write_text(PROBE)
    for package in ("wander", "envs"):
        (root / package).symlink_to(REPO / package)
    return root


def start_server(socket: Path) -> subprocess.Popen:
    """A stage server on `socket`, once it says it is ready."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tasks.runtime.stage_server", str(socket)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout.readline().startswith("stage server ready"), "the server did not start"
    return proc


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A stage server of its own, ready (the suite's may still be loading its libraries)."""
    socket = tmp_path_factory.mktemp("server") / "socket"
    proc = start_server(socket)
    yield proc, str(socket)
    proc.terminate()
    proc.wait(timeout=60)


def command(project: Path, socket: str | None, *args: str, python: tuple[str, ...] = (), **env: str):
    """`python [python options] -m tasks.probe ARGS` in the project, through `socket` when given."""
    environ = {k: v for k, v in os.environ.items() if k != SERVER_ENV}
    environ.update(env, PROBE="from the command")
    if socket:
        environ[SERVER_ENV] = socket
    return subprocess.Popen(
        [sys.executable, *python, "-m", "tasks.probe", *args],
        cwd=project,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_served_stage_is_the_commands_own_code_arguments_environment_streams_and_status(project, server):
    proc, socket = server
    done = command(project, socket, "--exit", "3", "an argument")
    out, err = done.communicate(timeout=60)
    report = json.loads(out.splitlines()[0])
    assert done.returncode == 3, err
    assert report["ppid"] == proc.pid and report["torch_loaded"]  # forked from the warm server
    assert report["file"] == str(project / "tasks/probe.py")
    assert report["cwd"] == str(project) and report["argv"] == ["--exit", "3", "an argument"]
    assert report["probe_env"] == "from the command" and report["server_env"] is None
    assert "to stderr" in err and "runs itself" not in err


@pytest.mark.parametrize(
    "python, env",
    [(("-X", "importtime"), {}), ((), {"OMP_NUM_THREADS": "7"})],
    ids=["interpreter options", "environment read at import"],
)
def test_a_command_the_server_cannot_match_runs_itself(project, server, python, env):
    _, socket = server
    done = command(project, socket, python=python, **env)
    out, err = done.communicate(timeout=120)
    report = json.loads(out.splitlines()[0])
    assert done.returncode == 0, err
    assert report["ppid"] == os.getpid() and not report["torch_loaded"]
    if env:
        assert "does not run this command (environment read at import differs: OMP_NUM_THREADS)" in err


def test_a_real_stage_says_the_same_through_the_server(project, server):
    """A stage's help and its refusal of a missing params file: same output, same status, served or not."""
    _, socket = server
    for args in (["--help"], ["--params", "missing.yaml"]):
        plain, served = (
            subprocess.run(
                [sys.executable, "-m", "tasks.build_model", *args],
                cwd=REPO,
                env={**{k: v for k, v in os.environ.items() if k != SERVER_ENV}, **extra},
                capture_output=True,
                text=True,
                timeout=120,
            )
            for extra in ({}, {SERVER_ENV: socket})
        )
        assert (served.returncode, served.stdout, served.stderr) == (
            plain.returncode,
            plain.stdout,
            plain.stderr,
        )
    assert plain.returncode == 2 and "missing.yaml" in plain.stderr


def started(done: subprocess.Popen) -> dict:
    """The probe's report, once it is running."""
    return json.loads(done.stdout.readline())


def gone(*pids: int, within: float) -> bool:
    """Whether every pid ended within `within` seconds."""
    deadline = time.monotonic() + within
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(alive(pid) for pid in pids)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_command_stops_the_stage_which_unwinds_and_its_status_is_the_commands(
    project, server, sig
):
    _, socket = server
    done = command(project, socket, "sleep")
    report = started(done)
    done.send_signal(sig)
    assert done.wait(timeout=30) == 128 + sig
    assert "stopped" in done.stdout.read()
    assert gone(report["pid"], report["helper"], within=5)


def test_a_command_killed_outright_takes_its_stage_and_the_stages_helpers_with_it(project, server):
    _, socket = server
    done = command(project, socket, "sleep")
    report = started(done)
    done.kill()
    done.wait()
    assert gone(report["pid"], report["helper"], within=KILL_AFTER + 5)


def test_a_stage_killed_by_a_signal_leaves_its_command_killed_by_it(project, server):
    _, socket = server
    done = command(project, socket, "killed")
    done.communicate(timeout=60)
    assert done.returncode == -signal.SIGKILL


def test_a_stopped_server_stops_its_stages_first(project, tmp_path):
    socket = tmp_path / "socket"
    proc = start_server(socket)
    done = command(project, str(socket), "sleep")
    report = started(done)
    proc.terminate()
    assert proc.wait(timeout=30) == 0
    assert done.wait(timeout=30) == 128 + signal.SIGTERM
    assert gone(report["pid"], report["helper"], within=5)
