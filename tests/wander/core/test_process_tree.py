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


def test_a_stop_during_stop_groups_wait_still_kills_and_waits_for_every_member() -> None:
    # A handler that raises at every signal (as Prefect's does while a flow runs), a second thread (the process's
    # signals may be taken there), a group whose members ignore SIGTERM: two stops land in the grace period.
    proc = python(
        """
        import subprocess, threading
        def raising(signum, frame):
            raise RuntimeError(f"signal {signum}")
        signal.signal(signal.SIGTERM, raising)
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        group = pt.start_group(
            ["sh", "-c", "trap '' TERM; (trap '' TERM; sleep 60) & echo $!; wait"], stdout=subprocess.PIPE, text=True
        )
        print(group.pid, group.stdout.readline().strip(), flush=True)
        start = time.monotonic()
        try:
            pt.stop_group(group, grace=30)
        except RuntimeError as e:
            print(f"raised {e} after {time.monotonic() - start:.1f}", flush=True)
        """,
        stdout=subprocess.PIPE,
    )
    members = [int(p) for p in proc.stdout.readline().split()]
    time.sleep(0.5)  # in stop_group's grace period by now
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    left = wait_gone(members, 0.5)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "a group member outlived a stop_group that a second signal interrupted"
    assert out.startswith(f"raised signal {signal.SIGTERM} after "), out
    assert float(out.split()[-1]) < 5  # the stop cut the 30 s grace short


def test_a_stop_inside_defer_stops_is_raised_as_the_block_ends() -> None:
    proc = python(
        """
        start = time.monotonic()
        try:
            with pt.stop_on_signals(grace=30):
                with pt.defer_stops():  # a database transaction, say
                    os.kill(os.getpid(), signal.SIGTERM)
                    time.sleep(0.5)
                    print("committed", flush=True)
                time.sleep(60)
        except pt.Stopped as stop:
            print(f"unwound after {time.monotonic() - start:.1f}", flush=True)
            sys.exit(stop.exit_code)
        """,
        stdout=subprocess.PIPE,
    )
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 128 + signal.SIGTERM
    lines = out.splitlines()
    assert lines[0] == "committed" and lines[1].startswith("unwound after ")
    assert float(lines[1].split()[-1]) < 1.5  # raised just after the block, not at the 30 s backstop


def test_a_stop_still_deferred_when_its_block_ends_is_forgotten() -> None:
    # Redelivered after the stop_on_signals block, it would reach whatever handler the block restored.
    proc = python(
        """
        received = []
        signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
        with pt.stop_on_signals(grace=30):
            with pt.defer_stops():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.3)
        time.sleep(1.0)  # under the restored handler: a redelivery would land here
        print(len(received), pt.stops_deferred(), flush=True)
        os._exit(0)  # the stop armed the backstop; this process is done
        """,
        stdout=subprocess.PIPE,
    )
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0 and out == "0 False\n", out


def test_a_watch_on_a_descriptor_past_1023_still_stops_this_process() -> None:
    # select() refuses descriptors >= 1024: the watch thread died silently and this process outlived the other.
    proc = python(
        """
        import resource, subprocess
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < 2048:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(2048, hard), hard))
        held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
        watched = subprocess.Popen(["sleep", "60"])
        pt.stop_when_gone(watched.pid, grace=1.0)
        try:
            with pt.stop_on_signals(grace=5):
                print(watched.pid, flush=True)  # once the handler is in: the kill below may stop us at once
                time.sleep(60)
        except pt.Stopped as stop:
            print("stopped", flush=True)
            sys.exit(stop.exit_code)
        """,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    watched = proc.stdout.readline()
    assert len(os.listdir(f"/proc/{proc.pid}/fd")) > 1100  # the pidfd's number is past select's limit
    os.kill(int(watched), signal.SIGKILL)
    try:
        out, err = proc.communicate(timeout=10)
    finally:
        proc.kill()  # a watch that died silently leaves it sleeping
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert out == "stopped\n" and "Traceback" not in err
