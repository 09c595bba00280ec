"""The sandbox's runs apart from each other and from the kernel: a neighbour's fork bomb does not fail a run, no
nested user namespace, the seccomp filter refuses every call on its list (and lets a fork and a thread through),
and a run the caller talks to line by line (`Sandbox.open`) keeps its limits. Real bubblewrap, real limits."""

from __future__ import annotations

import os
import threading
import time

import pytest

from wander.core.sandbox import Sandbox, SandboxLimits
from wander.core.seccomp import ARCHES, REFUSED, SeccompUnsupported, filter_program

from ...sandbox_host import nothing_left_running  # noqa: F401

LIMITS = SandboxLimits(wall_seconds=6, cpu_seconds=2, memory_mb=256, processes=32)
TABLE = ARCHES[os.uname().machine][1]


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(LIMITS, parallel=2)


def run(sandbox: Sandbox, code: str):
    """`code` as the program `python3 main.py` of a run."""
    return sandbox.run(["python3", "main.py"], files={"main.py": code})


# Holds 40 processes (as many as the process limit lets it) for 3 s, then says how many it got.
HOLDER = """
import os, time
children = 0
for _ in range(40):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(3)
        os._exit(0)
    children += 1
print(children)
time.sleep(3)
"""
# A correct program that starts its own processes: 8 children, one after another, and a thread.
NEIGHBOUR = """
import os, threading
for _ in range(8):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
threading.Thread(target=print, args=("thread",)).start()
print("done")
"""


def test_a_neighbours_fork_bomb_does_not_fail_a_run_each_sandbox_has_its_own_process_limit(sandbox):
    results = {}
    holder = threading.Thread(target=lambda: results.update(holder=run(sandbox, HOLDER)))
    holder.start()
    time.sleep(1.0)  # the holder has its processes
    results["neighbour"] = run(sandbox, NEIGHBOUR)
    holding = holder.is_alive()
    holder.join()
    assert holding, "the holder ended before the neighbour ran: the test checked nothing"
    assert results["neighbour"].ok and results["neighbour"].stdout == "thread\ndone\n", results["neighbour"]
    held = int(results["holder"].stdout)
    assert (
        LIMITS.processes - 4 <= held < LIMITS.processes
    )  # its own limit stopped it (the shell and python count)


def test_no_nested_user_namespace_and_no_other_namespace_or_mount(sandbox):
    code = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for name, flags in (("user", 0x10000000), ("mount", 0x00020000), ("net", 0x40000000), ("pid", 0x20000000)):
    print(name, libc.unshare(flags), os.strerror(ctypes.get_errno()))
print("mount", libc.mount(b"none", b"/work", b"tmpfs", 0, None), os.strerror(ctypes.get_errno()))
"""
    result = run(sandbox, code)
    assert result.ok, result
    lines = result.stdout.splitlines()
    assert len(lines) == 5 and all(" -1 " in line for line in lines), lines
    status = run(sandbox, "print(open('/proc/self/status').read())").stdout
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    assert fields["Seccomp"].strip() == "2" and fields["NoNewPrivs"].strip() == "1"
    assert fields["CapEff"].strip() == "0000000000000000"


def test_every_call_on_the_filters_list_is_refused_and_a_fork_and_a_thread_still_work(sandbox):
    numbers = {name: TABLE[name] for name in REFUSED if name in TABLE}
    code = f"""
import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
for name, number in {numbers!r}.items():
    ctypes.set_errno(0)
    print(name, libc.syscall(number, 0, 0, 0, 0, 0, 0), ctypes.get_errno())
ctypes.set_errno(0)
print("clone3", libc.syscall({TABLE["clone3"]}, 0, 0), ctypes.get_errno())
pid = os.fork()
if pid == 0:
    os._exit(7)
print("fork", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
thread = threading.Thread(target=print, args=("thread ran",))
thread.start()
thread.join()
"""
    result = run(sandbox, code)
    assert result.ok, result
    seen = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert {name: seen[name] for name in numbers} == {name: "-1 1" for name in numbers}  # EPERM
    assert (
        seen["clone3"] == "-1 38"
    )  # ENOSYS: the C library falls back to clone, whose flags the filter reads
    assert seen["fork"] == "7" and seen["thread"] == "ran"


def test_ptrace_of_the_sandboxs_parent_and_reading_another_process_memory_are_refused(sandbox):
    code = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
print("attach", libc.ptrace(16, os.getppid(), None, None), ctypes.get_errno())
print("traceme", libc.ptrace(0, 0, None, None), ctypes.get_errno())
"""
    result = run(sandbox, code)
    assert result.stdout.splitlines() == ["attach -1 1", "traceme -1 1"], result


def test_the_filter_is_refused_for_a_machine_it_has_no_table_for():
    assert len(filter_program("x86_64")) % 8 == 0 and filter_program("aarch64") != filter_program("x86_64")
    with pytest.raises(SeccompUnsupported, match="no seccomp table for 'riscv64'"):
        filter_program("riscv64")


def test_a_run_talked_to_line_by_line_answers_in_turn_and_keeps_its_wall_clock_limit():
    sandbox = Sandbox(SandboxLimits(wall_seconds=2))
    echo = "import sys\nfor line in sys.stdin:\n    print(line.strip().upper(), flush=True)\n"
    with sandbox.open(["python3", "main.py"], files={"main.py": echo}) as process:
        process.send("one\n")
        first = process.readline()
        process.send("two\n")
        second = process.readline()
        process.send("", close=True)
        process.wait()
    assert (first, second) == ("ONE", "TWO") and process.execution.ok, process.execution
    start = time.monotonic()
    with sandbox.open(["python3", "main.py"], files={"main.py": "import time; time.sleep(60)"}) as process:
        silent = process.readline()
    assert silent is None and process.execution.reason == "wall-clock timeout after 2 s"
    assert time.monotonic() - start < 2 + 3
