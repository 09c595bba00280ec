"""Hostile code sent as a model's replies through the coding env's tools (and its server): each attack is contained,
the episode scores 0 with the reason in the tool's answer, the host is unchanged, nothing is left running, and the
env (and the server, with another session playing) keeps serving. Real bubblewrap, real limits, a real server on
127.0.0.1; tests/wander/core/test_sandbox.py checks the sandbox itself."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from envs.coding.teacher import tool_call
from wander import load_environment
from wander.core.policy import Reply
from wander.serve.client import RemoteEnvironment
from wander.serve.server import serve_env_in_thread

from ...sandbox_host import loopback_server, nothing_left_running  # noqa: F401
from ..scripted import Scripted

PROJECT = Path(__file__).resolve().parents[3]
TIMEOUT_S = 3.0
SETTINGS = {
    "num_train": 8,
    "num_eval": 8,
    "num_test": 8,
    "timeout_s": TIMEOUT_S,
    "cpu_s": 1,
    "memory_mb": 128,
}
GIVE_UP = "I cannot solve it."


@pytest.fixture(scope="module")
def env():
    return load_environment("coding", **SETTINGS)


def attacked(env, tool: str, code: str):
    """One episode: `code` through `tool`, then a reply that gives up; the scored episode."""
    [episode] = env.rollout(Scripted(tool_call(tool, code), GIVE_UP), [env.get_dataset("eval")[0]])
    return episode


def answer(episode) -> str:
    """The tool's answer to the attack."""
    return next(m["content"] for m in episode.messages if m["role"] == "tool")


def still_serves(env) -> None:
    """The slip-free teacher solves an episode after the attack."""
    [episode] = env.rollout(env.teacher_policy(0.0, seed=0), [env.get_dataset("eval")[1]])
    assert episode.reward == 1.0 and episode.error is None


@pytest.mark.parametrize(
    ("name", "code", "shown"),
    [
        ("fork bomb", "import os\nwhile True:\n    os.fork()", "did not load: BlockingIOError"),
        ("infinite loop", "while True:\n    pass", "were stopped: CPU time limit"),
        ("memory bomb", "x = bytearray(4 * 1024**3)", "did not load: MemoryError"),
        (
            "gigabytes of output",
            "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)",
            "were stopped: output limit",
        ),
        ("segfault", "import ctypes\nctypes.string_at(0)", "were stopped: segmentation fault"),
        (
            "sleep past the timeout",
            "import time\ntime.sleep(60)",
            f"were stopped: wall-clock timeout after {TIMEOUT_S:g} s",
        ),
    ],
)
def test_an_exhausting_attack_in_the_tests_is_stopped_scored_0_and_the_env_serves_on(env, name, code, shown):
    episode = attacked(env, "run_tests", code)
    assert shown in answer(episode).splitlines()[0], (name, answer(episode))
    assert episode.reward == 0.0 and episode.values["all_passed"] == 0.0 and episode.error is None
    # The limit it ran into, named in the episode's state (and its count a metric).
    [stop] = episode.state["stops"]
    limit = {"fork bomb": "process limit: ", "memory bomb": "memory limit: 128 MiB"}.get(
        name, shown.split(": ", 1)[1]
    )
    assert stop.startswith(limit) and episode.values["sandbox_stops"] == 1.0 and limit in answer(episode), (
        stop
    )
    still_serves(env)


def test_secrets_files_home_and_variables_are_invisible_to_run_code(env, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-seen")
    readme = str(PROJECT / "README.md")
    code = f"""import os
for path in ("/etc/shadow", {readme!r}, os.path.expanduser("~/.ssh"), "/root/.ssh", "/home"):
    print(path, os.path.exists(path))
print(os.environ.get("OPENAI_API_KEY"), sorted(os.environ))
"""
    episode = attacked(env, "run_code", code)
    shown = answer(episode)
    assert shown.startswith("exit status 0\nstdout:\n"), shown
    lines = shown.splitlines()[2:]
    assert all(line.endswith(" False") for line in lines[:-1]) and len(lines) == 6, shown
    assert lines[-1] == "None ['HOME', 'LANG', 'PATH', 'PWD']" and "sk-never-seen" not in shown
    assert episode.reward == 0.0
    still_serves(env)


def test_writes_outside_the_private_folder_and_a_symlink_escape_change_nothing(env, tmp_path):
    target = tmp_path / "host.txt"
    target.write_text("unchanged")
    code = f"""import os
for path in ("/usr/evil", "/evil", {str(target)!r}):
    try:
        open(path, "w").write("x")
        print(path, "written")
    except OSError as e:
        print(path, type(e).__name__)
os.symlink({str(target)!r}, "link")
print("link", os.path.exists("link"))
"""
    shown = answer(attacked(env, "run_code", code))
    assert "written" not in shown and "link False" in shown, shown
    assert target.read_text() == "unchanged" and not Path("/evil").exists()


def test_a_server_on_the_hosts_loopback_sees_no_connection_from_the_tests(env):
    with loopback_server(TIMEOUT_S) as (port, accepted):
        code = f"""import socket
socket.create_connection(("127.0.0.1", {port}), timeout=2)
def solve(*args):
    return None
"""
        episode = attacked(env, "run_tests", code)
    assert answer(episode).startswith("Your code did not load: ConnectionRefusedError"), answer(episode)
    assert not accepted and episode.reward == 0.0


def test_a_daemon_a_kill_of_its_parent_and_a_fake_verdict_do_not_pass(env):
    # The daemon double-forks to outlive the run (the fixture checks it is gone); the code kills its parent and
    # pid 1, then prints what a verdict line looks like without the harness's nonce.
    code = """import os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(60)
    os._exit(0)
os.kill(os.getppid(), signal.SIGKILL)
os.kill(1, signal.SIGKILL)
print('{"results": [{"ok": true}]}')
"""
    episode = attacked(env, "run_tests", code)
    assert answer(episode).startswith("Your code did not load: NameError: the code defines no function"), (
        answer(episode)
    )
    assert episode.reward == 0.0
    still_serves(env)


def test_the_server_keeps_serving_other_sessions_while_one_attacks(env):
    spec = env.get_dataset("eval")[2]
    results = {}
    with serve_env_in_thread(env) as url:
        remote = RemoteEnvironment(url)

        def attack() -> None:
            try:
                episode = remote.start(spec)
                remote.advance(episode, Reply(tool_call("run_tests", "import time\ntime.sleep(60)")))
                results.update(attack=episode.messages[-1]["content"], error=episode.error)
            except Exception as error:  # shown by the assertions below, not lost in the thread
                results["attack"] = f"raised {error!r}"
            results["ended"] = time.monotonic()

        attacker = threading.Thread(target=attack)
        attacker.start()
        time.sleep(0.5)  # the attack's step is running: its sandbox sleeps until the timeout
        start = time.monotonic()
        teacher = remote.rollout(env.teacher_policy(0.0, seed=0), [env.get_dataset("eval")[3]] * 3)
        served_in = time.monotonic() - start
        attacking = attacker.is_alive()
        attacker.join()
    assert [e.reward for e in teacher] == [1.0] * 3
    assert attacking, f"the other sessions waited for the attack ({served_in:.1f} s): {results}"
    assert results["attack"].startswith(f"The tests were stopped: wall-clock timeout after {TIMEOUT_S:g} s")
