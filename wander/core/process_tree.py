"""Stop means stop: a process and everything it started end together, within seconds, whatever ends it.

Four pieces, used by the pipeline flow, the stages and the servers they start:

- `with stop_on_signals():` SIGTERM and SIGINT raise `Stopped` (a KeyboardInterrupt) in the main thread, so `with` blocks
  unwind (servers stopped, MLflow runs ended KILLED), and arm `exit_after`: a stuck teardown cannot keep the process.
  Where raising would do harm, the stop waits: inside `with defer_stops():` (a database transaction says so itself)
  or a finalizer; see `unsafe_to_raise`. A stop still waiting when the `stop_on_signals` block ends is forgotten.
- `start_group(cmd)` / `stop_group(proc)`: a child in a process group of its own, stopped as a whole (SIGTERM, a
  grace period, SIGKILL, a wait), stragglers included, whatever signal arrives meanwhile.
- `stop_when_gone(pid)`: a watch thread that stops this process when `pid` ends, even by SIGKILL, so a helper is
  never orphaned. It opens a pidfd at once (no pid-reuse race, no polling) where Linux has it; a watch that cannot
  watch logs why. `die_with_parent` is
  the same for an exec'd program we cannot put a thread in (Linux PR_SET_PDEATHSIG; it fires when the *thread*
  that started the child ends, so start such a child from a thread that outlives it).
- `exit_after(seconds)`: the backstop (later calls may only bring it closer): kill every descendant and leave with `os._exit`, e.g. when an API the
  teardown reports to is already gone and its client retries for minutes.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
REDELIVER_EVERY = 0.02  # seconds between tries of a stop that had to wait
WATCH_PID_ENV = "WANDER_STOP_WITH_PID"
"""A process id a stage watches (`stop_when_gone`): the flow exports its own, so a stage ends with the flow even
when DVC, between them, is killed first or never passes a signal on."""
_PR_SET_PDEATHSIG = 1
_exit_armed = threading.Event()
_exit_lock = threading.Lock()
_exit_deadline = [0.0]  # monotonic time of the backstop's exit, once armed
# Stop signals that arrived where raising was unsafe, until one is raised or forgotten.
_waiting: set[int] = set()
_waiting_lock = threading.Lock()  # a redelivery is sent only while its signal still waits
_deferring = [0]  # how many `defer_stops` blocks the main thread is in: the flag the handler reads


class Stopped(KeyboardInterrupt):
    """A stop signal arrived: unwind (releasing what was started), then exit with `exit_code` (128 + the signal)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by signal `signum`."""
        return 128 + self.signum


@contextlib.contextmanager
def stop_on_signals(grace: float = 10.0) -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT raise `Stopped` in the main thread and arm `exit_after(grace)`; later
    ones are ignored (the teardown under way must not be interrupted). The previous handlers come back after the
    block; outside the main thread, where Python takes no signal handlers, it does nothing."""

    def handler(signum: int, frame: Any) -> None:
        waited = signum in _waiting
        if _exit_armed.is_set() and not waited:
            return
        exit_after(grace, 128 + signum)
        if unsafe_to_raise(frame):
            if not waited:
                _waiting.add(signum)
                threading.Thread(
                    target=_redeliver, args=(signum,), name="stop-redeliver", daemon=True
                ).start()
            return
        _waiting.discard(signum)
        raise Stopped(signum)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, handler) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        try:
            # A stop still waiting is forgotten with the block: redelivered later, it would reach the handler
            # restored below (Python's default SIGINT handler raises KeyboardInterrupt in code that took no stops).
            # The handler itself never takes this lock: it may run in this very thread, inside the `with`.
            with _waiting_lock:
                _waiting.clear()
        finally:
            for signum, before in previous.items():
                signal.signal(signum, before)


@contextlib.contextmanager
def defer_stops() -> Iterator[None]:
    """Within the block, a stop signal waits (retried every `REDELIVER_EVERY` s) and is raised once the block ends.

    For code a stop must not cut in half: a database transaction interrupted there keeps its lock, and the next
    write of the same process (MLflow recording the run KILLED) waits for it (SQLite's busy timeout, 20 s in
    MLflow's store). Code that enters a transaction says so; nothing else defers a stop (a file copy stops at
    once). Blocks nest; outside the main thread, which takes no signals, it does nothing.
    """
    counted = threading.current_thread() is threading.main_thread()
    if counted:
        _deferring[0] += 1
    try:
        yield
    finally:
        if counted:
            _deferring[0] -= 1


def stops_deferred() -> bool:
    """Whether a stop signal arriving now would wait for a `defer_stops` block to end."""
    return _deferring[0] > 0


def unsafe_to_raise(frame: Any) -> bool:
    """Whether a stop raised in `frame` would be lost or leave harm: inside a `defer_stops` block (a database
    transaction) or a finalizer (`__del__`, whose exceptions Python prints and drops). The stop is then retried
    every `REDELIVER_EVERY` seconds until it lands elsewhere; the backstop armed with it still bounds the wait."""
    if stops_deferred():
        return True
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _redeliver(signum: int) -> None:
    while True:
        time.sleep(REDELIVER_EVERY)
        with _waiting_lock:
            if signum not in _waiting:
                return
            # To the main thread itself: a process-directed signal may go to another thread, leaving the main
            # thread's wait uninterrupted until it ends by itself.
            signal.pthread_kill(threading.main_thread().ident, signum)


def exit_after(seconds: float, code: int = 128 + signal.SIGTERM) -> None:
    """In `seconds`, SIGKILL every descendant and `os._exit(code)`, unless the process ended; a later call may
    bring that moment closer, never put it off."""
    with _exit_lock:
        deadline = time.monotonic() + seconds
        if _exit_armed.is_set():
            _exit_deadline[0] = min(_exit_deadline[0], deadline)
            return
        _exit_deadline[0] = deadline
        _exit_armed.set()

    def backstop() -> None:
        while (left := _exit_deadline[0] - time.monotonic()) > 0:
            time.sleep(min(left, 0.1))
        print("still running after the stop: killing what is left", file=sys.stderr, flush=True)
        kill_descendants(os.getpid())
        os._exit(code)

    threading.Thread(target=backstop, name="exit-after", daemon=True).start()


def start_group(cmd: Sequence[str], die_with_parent: bool = False, **popen: Any) -> subprocess.Popen:
    """`subprocess.Popen(cmd, **popen)` as the leader of a new process group (and session): a terminal's Ctrl-C
    reaches this process only, which then stops the group with `stop_group`."""
    if die_with_parent and sys.platform == "linux":
        popen["preexec_fn"] = die_with_parent_in_child
    return subprocess.Popen(list(cmd), start_new_session=True, **popen)


def stop_group(proc: subprocess.Popen, grace: float = 5.0) -> int:
    """Stop `proc`'s whole process group: SIGTERM, up to `grace` seconds for every member to end (not only the
    leader: a stage unwinds after DVC, its parent, is gone), then SIGKILL to whatever is left (after a clean exit
    too: stragglers) and a wait for it; return the leader's exit code. A stop that arrives meanwhile cuts the grace
    short, never the SIGKILL and the wait, and is raised once the group is gone."""
    # No signal masking: pthread_sigmask covers the calling thread only, and a process-directed signal then runs
    # its handler anyway (in the main thread, once another thread took it). Whatever a handler raises is held.
    held: BaseException | None = None
    try:
        signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while (proc.poll() is None or _group_alive(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
    except BaseException as e:  # a second stop: the caller insists, SIGKILL now
        held = e
    while True:
        try:
            signal_group(proc.pid, signal.SIGKILL)
            code = proc.wait()
            # SIGKILL takes effect asynchronously; orphans are reaped by init.
            settled = time.monotonic() + 1.0
            while _group_alive(proc.pid) and time.monotonic() < settled:
                time.sleep(0.02)
            break
        except BaseException as e:  # yet another stop: the group is not gone yet, so again
            held = held or e
    if held is not None:
        raise held
    return code


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, sig: int) -> None:
    """Send `sig` to process group `pgid`, if any process of it is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def stop_when_gone(pid: int | None = None, grace: float = 5.0) -> threading.Thread:
    """Watch `pid` (default: the parent) from a daemon thread; when it ends, SIGTERM this process (its own stop
    handling runs), and `grace` seconds later kill its descendants and `os._exit`. A forked child should pass the
    pid its parent had before the fork: a parent already gone when this runs leaves no parent to watch."""
    parent = pid is None
    pid = os.getppid() if pid is None else pid
    fd = _pidfd(pid)
    if parent and os.getppid() != pid:  # it ended before the pidfd was open
        fd = _pidfd(-1)

    def watch() -> None:
        if fd is None or not _wait_readable(fd, pid):
            while (os.getppid() == pid) if parent else alive(pid):
                time.sleep(0.25)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace)
        kill_descendants(os.getpid())
        os._exit(128 + signal.SIGTERM)

    thread = threading.Thread(target=watch, name=f"stop-when-{pid}-ends", daemon=True)
    thread.start()
    return thread


def _wait_readable(fd: int, pid: int) -> bool:
    """Wait until pidfd `fd` is readable (its process ended) and close it; False, logged, if it cannot be waited on."""
    # poll, not select: select refuses descriptors >= 1024 (a process with many files open) with an error that
    # would end the watch thread silently, leaving this process to outlive the one it watches.
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not poller.poll():
            pass
        return True
    except (OSError, ValueError) as e:
        logger.warning("cannot wait on the pidfd of process %d (%s): polling it every 0.25 s instead", pid, e)
        return False
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


def _pidfd(pid: int) -> int | None:
    try:
        if pid < 0:
            raise ProcessLookupError(pid)
        return os.pidfd_open(pid)  # Linux >= 5.3
    except ProcessLookupError:
        return os.open(os.devnull, os.O_RDONLY)  # already gone: "readable" at once
    except (AttributeError, OSError):
        return None


def die_with_parent_in_child() -> None:
    """A `preexec_fn`: the child gets SIGTERM when the thread that started it ends (see `die_with_parent`)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def alive(pid: int) -> bool:
    """Whether process `pid` runs on this host (a zombie, ended but not yet reaped, is not alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: it exists
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def descendants(pid: int) -> list[int]:
    """Every living process below `pid` (children, theirs, ...), read from /proc; empty where there is no /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, []))
    return found


def kill_descendants(pid: int) -> None:
    """SIGKILL every descendant of `pid`."""
    for child in descendants(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signal.SIGKILL)
