"""wander.core.process_tree with real processes: groups stopped whole, helpers that outlive nobody, clean stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from wander.core.process_tree import alive, descendants, start_group, stop_group

MODULE = Path(__file__).resolve().parents[3] / "wander/core/process_tree.py"


def python(code: str, **popen: object) -> subprocess.Popen:
    """A Python child that imports process_tree by path (no package import: fast) and runs `code`."""
    prelude = (
        "import importlib.util, os, signal, sys, time\n"
        f"spec = importlib.util.spec_from_file_location('process_tree', {str(MODULE)!r})\n"
        "pt = importlib.util.module_from_spec(spec); spec.loader.exec_module(pt)\n"
    )
    return subprocess.Popen([sys.executable, "-c", prelude + textwrap.dedent(code)], text=True, **popen)


def wait_gone(pids: list[int], seconds: float) -> list[int]:
    """The pids still alive after up to `seconds`."""
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def test_stop_group_ends_the_whole_group_even_a_member_that_ignores_sigterm() -> None:
    # A shell whose background child ignores SIGTERM: the leader ends at once, the child only by SIGKILL.
    proc = start_group(
        ["sh", "-c", "(trap '' TERM; sleep 60) & echo $!; wait"], stdout=subprocess.PIPE, text=True
    )
    child = int(proc.stdout.readline())
    assert os.getpgid(child) == proc.pid != os.getpgid(0)  # a group of its own
    start = time.monotonic()
    stop_group(proc, grace=1.0)
    assert not alive(child) and 1.0 <= time.monotonic() - start < 5
    proc.stdout.close()


def test_stop_group_after_a_clean_exit_removes_stragglers() -> None:
    proc = start_group(["sh", "-c", "sleep 60 & echo $!"], stdout=subprocess.PIPE, text=True)
    straggler = int(proc.stdout.readline())
    proc.wait()
    assert alive(straggler)
    assert stop_group(proc, grace=2.0) == 0 and not wait_gone([straggler], 2)
    proc.stdout.close()


def test_a_forked_helper_watching_its_parent_ends_when_the_parent_is_killed() -> None:
    parent = python(
        """
        if os.fork() == 0:
            pt.stop_when_gone(grace=1.0)
            print(os.getpid(), flush=True)  # only once it watches: a parent killed earlier leaves no trace to watch
            time.sleep(60)
            os._exit(0)
        time.sleep(60)
        """,
        stdout=subprocess.PIPE,
    )
    helper = int(parent.stdout.readline())
    assert helper in descendants(parent.pid)
    parent.kill()  # SIGKILL: the parent can do nothing for its helper
    parent.wait()
    parent.stdout.close()
    left = wait_gone([helper], 5)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "the helper outlived its parent"


def test_stop_signals_unwind_then_exit_128_plus_the_signal() -> None:
    for signum in (signal.SIGTERM, signal.SIGINT):
        proc = python(
            """
            try:
                with pt.stop_on_signals(grace=5):
                    print("ready", flush=True)
                    time.sleep(60)
            except pt.Stopped as stop:
                print("unwound", stop, flush=True)
                sys.exit(stop.exit_code)
            """,
            stdout=subprocess.PIPE,
        )
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=10)
        assert proc.returncode == 128 + signum
        assert out == f"unwound stopped by {signal.Signals(signum).name}\n"


def test_a_stuck_teardown_cannot_keep_the_process_past_its_grace() -> None:
    proc = python(
        """
        try:
            with pt.stop_on_signals(grace=1):
                print("ready", flush=True)
                time.sleep(60)
        except pt.Stopped:
            time.sleep(60)  # a teardown that hangs
        """,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout.readline() == "ready\n"
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=10)
    assert proc.returncode == 128 + signal.SIGTERM and time.monotonic() - start < 5


def test_a_stop_that_lands_in_a_finalizer_is_raised_after_it() -> None:
    # Python prints and drops an exception raised in __del__: raised there, the stop would be lost.
    proc = python(
        """
        class Finalized:
            def __del__(self):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.3)  # the handler runs here, inside __del__
                print("finalizer done", flush=True)

        try:
            with pt.stop_on_signals(grace=30):
                Finalized()
                time.sleep(60)
        except pt.Stopped as stop:
            print("unwound", stop, flush=True)
            sys.exit(stop.exit_code)
        """,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert out == "finalizer done\nunwound stopped by SIGTERM\n" and "Exception ignored" not in err
