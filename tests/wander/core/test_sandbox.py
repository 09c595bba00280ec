"""The sandbox against hostile code: each attack runs as a model's program would, and the test checks that it is
contained with a reason, that the host is unchanged, and that nothing is left running (real bubblewrap, real
limits, a real server on 127.0.0.1)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from wander.core.sandbox import Sandbox, SandboxLimits

from ...sandbox_host import loopback_server, nothing_left_running, processes_of, sandbox_user  # noqa: F401

LIMITS = SandboxLimits(wall_seconds=4, cpu_seconds=2, memory_mb=256, processes=32, output_bytes=65536)
PROJECT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(LIMITS, parallel=2)


def run(sandbox: Sandbox, code: str):
    """`code` as the program `python3 main.py` of a run."""
    return sandbox.run(["python3", "main.py"], files={"main.py": code})


def test_a_program_runs_with_its_files_in_a_private_folder(sandbox):
    result = sandbox.run(
        ["python3", "main.py"],
        files={"main.py": "import helper, os; print(helper.VALUE, os.getcwd())", "helper.py": "VALUE = 42"},
    )
    assert result.ok and result.stdout == "42 /work\n" and result.returncode == 0


@pytest.mark.parametrize(
    ("name", "code", "reason"),
    [
        ("infinite loop", "while True: pass", "CPU time limit"),
        ("sleep past the timeout", "import time; time.sleep(60)", "wall-clock timeout after 4 s"),
        ("memory bomb", "x = bytearray(4 * 1024**3)", "memory limit: 256 MiB"),
        ("fork bomb", "import os\nwhile True:\n    os.fork()", "process limit: 32"),
        ("gigabytes of output", "import sys\nwhile True: sys.stdout.write('x' * 65536)", "output limit"),
        ("segfault", "import ctypes; ctypes.string_at(0)", "segmentation fault"),
        ("a file past its size", "open('big', 'wb').write(b'x' * 64 * 1024**2)", "file size limit"),
    ],
)
def test_each_exhausting_attack_is_stopped_with_its_reason(sandbox, name, code, reason):
    start = time.monotonic()
    result = run(sandbox, code)
    assert not result.ok and result.reason.startswith(reason), (name, result)
    assert time.monotonic() - start < LIMITS.wall_seconds + 3
    assert len(result.stdout) + len(result.stderr) <= LIMITS.output_bytes


def test_the_host_is_invisible_secrets_files_home_and_environment(sandbox, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-seen")
    readme = str(PROJECT / "README.md")
    code = f"""
import os
for path in ("/etc/shadow", "/etc/passwd", {readme!r}, "/root/.ssh", os.path.expanduser("~/.ssh"), "/home"):
    print(path, os.path.exists(path))
print(sorted(os.environ))
"""
    result = run(sandbox, code)
    assert result.ok, result
    lines = result.stdout.splitlines()
    assert all(line.endswith(" False") for line in lines[:-1]), lines
    assert lines[-1] == "['HOME', 'LANG', 'PATH', 'PWD']" and "sk-never-seen" not in result.stdout


def test_writes_outside_the_private_folder_fail_and_a_symlink_leads_nowhere(sandbox, tmp_path):
    target = tmp_path / "host.txt"
    target.write_text("unchanged")
    code = f"""
import os
for path in ("/usr/evil", "/evil", {str(target)!r}):
    try:
        open(path, "w").write("x"); print(path, "written")
    except OSError as e:
        print(path, type(e).__name__)
os.symlink({str(target)!r}, "link")
os.symlink("/etc/shadow", "shadow")
for link in ("link", "shadow"):
    print(link, os.path.exists(link))
"""
    result = run(sandbox, code)
    assert result.ok, result
    assert (
        "written" not in result.stdout and "link False" in result.stdout and "shadow False" in result.stdout
    )
    assert target.read_text() == "unchanged"


def test_a_server_on_the_hosts_loopback_sees_no_connection(sandbox):
    with loopback_server(LIMITS.wall_seconds) as (port, accepted):
        code = f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2); print("connected")
except OSError as e:
    print("refused", type(e).__name__)
"""
        result = run(sandbox, code)
    assert result.ok and result.stdout.startswith("refused") and not accepted


def test_a_daemon_that_double_forks_and_a_kill_of_its_parent_do_not_outlive_or_reach_the_host(sandbox):
    daemon = """
import os, time
if os.fork(): raise SystemExit(0)
os.setsid()
if os.fork(): raise SystemExit(0)
time.sleep(60)
"""
    assert run(sandbox, daemon).ok  # it returns at once; the fixture checks the grandchild is gone
    killer = (
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(1, signal.SIGKILL)\nprint('alive')"
    )
    result = run(sandbox, killer)
    assert (
        result.stdout == "alive\n"
    )  # its parent is the sandbox's own init, which ignores it; the host is untouched


def test_runs_go_in_parallel_up_to_the_bound_and_a_bad_run_does_not_disturb_the_others(sandbox):
    programs = ["import time; time.sleep(0.5); print('ok')"] * 4 + ["while True: pass"]
    results: list = [None] * len(programs)

    def one(i: int) -> None:
        results[i] = run(sandbox, programs[i])

    start = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(programs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.stdout for r in results[:4]] == ["ok\n"] * 4 and results[4].reason.startswith("CPU time limit")
    assert time.monotonic() - start >= 1.0  # two at a time: the four sleepers need at least two rounds


def test_a_file_outside_the_private_folder_is_refused_before_anything_runs(sandbox):
    with pytest.raises(ValueError, match="outside the working folder"):
        sandbox.run(["python3", "x.py"], files={"../x.py": "print(1)"})


def test_runs_after_a_fork_bomb_find_the_process_limit_free_again(sandbox):
    # Every process a run leaves is reaped by the run itself: no zombie waits on the host's init, counted against
    # the next runs' process limit (measured before the reaper: the 30th quick run in a row failed).
    assert run(sandbox, "import os\nwhile True:\n    os.fork()").reason.startswith("process limit")
    assert all(sandbox.run(["python3", "-I", "-c", "print(1)"]).ok for _ in range(2 * LIMITS.processes))
    # Another test's run (pytest-xdist's other worker) may hold a zombie for the instant before its reaper collects
    # it; one the reaper missed waits forever, so only a zombie that stays one for 3 s fails the test.
    lasting, deadline = set(processes_of(sandbox_user(), zombies=True)), time.monotonic() + 3
    while lasting and time.monotonic() < deadline:
        time.sleep(0.05)
        lasting &= set(processes_of(sandbox_user(), zombies=True))
    assert not lasting
