"""One sandboxed run while it runs and what it did: the process between the caller and bwrap, its output read up to a
budget, its stdin fed, its deadline kept, the reason it failed in words (`wander.core.sandbox` starts it).
"""

from __future__ import annotations

import os
import pwd
import resource
import signal
import subprocess
import threading
import time
from dataclasses import dataclass

# The process between the caller and bwrap: a child subreaper (prctl PR_SET_CHILD_SUBREAPER) that reaps every process
# the run leaves (bwrap's own init, orphaned when bwrap is killed, would otherwise wait as a zombie for the host's
# init, and zombies count against the process limit), and on SIGTERM kills bwrap (its PID namespace goes with it).
REAPER = """
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
child = os.fork()
if child == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
def stop(*_):
    try:
        os.kill(child, signal.SIGKILL)
    except ProcessLookupError:  # it ended by itself first: its status is waited for below
        pass
signal.signal(signal.SIGTERM, stop)
null = os.open("/dev/null", os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
code = 1
while True:
    try:
        pid, status = os.wait()
    except ChildProcessError:
        break
    if pid == child:
        code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""
KILL_GRACE = 2.0  # seconds the reaper gets to kill and reap the run before its group is SIGKILLed
SIGNALS = {
    signal.SIGSEGV: "segmentation fault",
    signal.SIGXCPU: "CPU time limit",
    signal.SIGXFSZ: "file size limit",
    signal.SIGKILL: "killed",
    signal.SIGABRT: "aborted",
}


@dataclass(frozen=True)
class SandboxLimits:
    """What one execution may use."""

    wall_seconds: float = 10.0
    """Wall-clock time before the whole run is killed."""
    cpu_seconds: int = 5
    """CPU time of each process (RLIMIT_CPU; SIGXCPU past it)."""
    memory_mb: int = 512
    """Address space of each process, in MiB (RLIMIT_AS): a Python allocation past it raises MemoryError."""
    processes: int = 32
    """Processes and threads of the sandbox's user at once (RLIMIT_NPROC): a fork bomb stops here."""
    open_files: int = 64
    """Open file descriptors of each process (RLIMIT_NOFILE)."""
    file_mb: int = 8
    """Largest file a process may write, in MiB (RLIMIT_FSIZE)."""
    work_mb: int = 16
    """Size of the private writable folder /work (a tmpfs), in MiB."""
    output_bytes: int = 65536
    """Bytes of stdout and stderr read, together; the run is killed past them."""


@dataclass
class Execution:
    """What one run did."""

    returncode: int | None
    """The command's exit status (None when it was killed by the sandbox)."""
    stdout: str
    stderr: str
    seconds: float
    reason: str | None = None
    """Why it did not succeed, in words, or None when it exited 0."""

    @property
    def ok(self) -> bool:
        """Exited 0 within every limit."""
        return self.reason is None


class SandboxProcess:
    """One running sandbox: lines to its stdin, lines from its stdout, all within the run's wall-clock time and
    output budget; `execution` once `Sandbox.open`'s block has ended."""

    def __init__(
        self,
        limits: SandboxLimits,
        python: str,
        user: pwd.struct_passwd | None,
        argv: list[str],
        filter_fd: int,
    ):
        self.limits, self.start = limits, time.monotonic()
        self.deadline = self.start + self.limits.wall_seconds
        self.timed_out = False
        self.execution: Execution | None = None
        self.proc = subprocess.Popen(
            [python, "-I", "-S", "-c", REAPER, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=self._limit,
            pass_fds=(filter_fd,),
            user=user.pw_uid if user else None,
            group=user.pw_gid if user else None,
            extra_groups=[] if user else None,
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
        )
        self.reader = _CappedReader(self.proc, self.limits.output_bytes)
        self.reader.start()

    def send(self, text: str, close: bool = False) -> None:
        """Write `text` to the run's stdin (and close it); a run that does not take it in its time is stopped."""
        writer = threading.Thread(target=self.reader.feed, args=(text, close), daemon=True)
        writer.start()
        writer.join(timeout=max(self.deadline - time.monotonic(), 0))
        if writer.is_alive():
            self._stop(timed_out=True)

    def readline(self) -> str | None:
        """The next line the run prints (without its newline), or None once it ended, overflowed or timed out."""
        line = self.reader.readline(self.deadline)
        if line is None and time.monotonic() >= self.deadline and self.proc.poll() is None:
            self._stop(timed_out=True)
        return line

    def wait(self) -> None:
        """Wait for the run to end by itself, until its wall-clock time is up."""
        try:
            self.proc.wait(timeout=max(self.deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            self._stop(timed_out=True)

    def _stop(self, timed_out: bool) -> None:
        self.timed_out = self.timed_out or timed_out
        if self.proc.poll() is None:
            _kill(self.proc)

    def finish(self) -> None:
        """Kill what is left and say what the run did (`execution`)."""
        if self.reader.ended:  # stdout closed: the run is ending by itself; its own status says how
            self.wait()
        self._stop(timed_out=False)
        stdout, stderr = self.reader.join()
        seconds, code, limits = time.monotonic() - self.start, self.proc.returncode, self.limits
        if self.timed_out:
            reason = f"wall-clock timeout after {limits.wall_seconds:g} s"
            self.execution = Execution(None, stdout, stderr, seconds, reason)
        elif self.reader.overflowed.is_set():
            reason = f"output limit: more than {limits.output_bytes} bytes"
            self.execution = Execution(None, stdout, stderr, seconds, reason)
        else:
            self.execution = Execution(code, stdout, stderr, seconds, _reason(code, stderr, limits))

    def _limit(self) -> None:
        """In the child before exec: the limits every process of the run inherits (the process limit is set
        inside, see `Sandbox._bwrap`)."""
        limits = self.limits
        # CPU: SIGXCPU at the soft limit (named in the reason), SIGKILL a second later.
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
        for kind, value in (
            (resource.RLIMIT_AS, limits.memory_mb * 2**20),
            (resource.RLIMIT_NOFILE, limits.open_files),
            (resource.RLIMIT_FSIZE, limits.file_mb * 2**20),
            (resource.RLIMIT_CORE, 0),
        ):
            resource.setrlimit(kind, (value, value))


class _CappedReader:
    """Reads stdout and stderr in threads up to a shared byte budget (past it, kills the run); hands out stdout's
    lines as they come."""

    def __init__(self, proc: subprocess.Popen, budget: int):
        self.proc, self.budget = proc, budget
        self.used = 0
        self.arrived = threading.Condition()
        self.overflowed = threading.Event()
        self.chunks: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        self.unread = bytearray()  # stdout not yet handed out by readline
        self.ended = False  # stdout reached its end
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start reading both streams."""
        streams = (("stdout", self.proc.stdout), ("stderr", self.proc.stderr))
        self.threads = [threading.Thread(target=self._read, args=s, daemon=True) for s in streams]
        for thread in self.threads:
            thread.start()

    def feed(self, text: str, close: bool) -> None:
        """Write to the run's stdin (a thread of its own calls this: a run that does not read would block it)."""
        try:
            self.proc.stdin.write(text.encode())
            self.proc.stdin.flush()
            if close:
                self.proc.stdin.close()
        except (OSError, ValueError):  # the run ended or closed its stdin first
            pass

    def _read(self, name: str, stream) -> None:
        while chunk := stream.read1(65536):
            with self.arrived:
                room = self.budget - self.used
                kept = chunk[: max(room, 0)]
                self.chunks[name].append(kept)
                if name == "stdout":
                    self.unread += kept
                self.used += len(chunk)
                self.arrived.notify_all()
                if self.used > self.budget and not self.overflowed.is_set():
                    self.overflowed.set()
                    _kill(self.proc)
        if name == "stdout":
            with self.arrived:
                self.ended = True
                self.arrived.notify_all()

    def readline(self, deadline: float) -> str | None:
        """stdout's next whole line, or None when it ends, overflows or `deadline` (time.monotonic) passes first."""
        with self.arrived:
            while b"\n" not in self.unread:
                left = deadline - time.monotonic()
                if self.ended or self.overflowed.is_set() or left <= 0:
                    return None
                self.arrived.wait(left)
            line, _, rest = bytes(self.unread).partition(b"\n")
            self.unread[:] = rest
            return line.decode(errors="replace")

    def join(self) -> tuple[str, str]:
        """Both streams as text, each cut at the budget."""
        for thread in self.threads:
            thread.join(timeout=5)
        return tuple(b"".join(self.chunks[n]).decode(errors="replace") for n in ("stdout", "stderr"))


def _kill(proc: subprocess.Popen) -> None:
    """End the run: the reaper kills bwrap (its PID namespace takes every process left in the sandbox with it) and
    reaps what is left; a reaper that does not end in KILL_GRACE goes with its process group."""
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=KILL_GRACE)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()


def _reason(code: int, stderr: str, limits: SandboxLimits) -> str | None:
    """Why a run that ended by itself failed, or None when it exited 0."""
    if code == 0:
        return None
    signum = -code if code < 0 else code - 128 if code > 128 else None
    if signum in SIGNALS:
        return f"{SIGNALS[signum]} (signal {signum})"
    limit = limit_hit(stderr, limits)
    if limit:
        return limit
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    return f"exit status {code}" + (f": {last[:200]}" if last else "")


def limit_hit(error: str, limits: SandboxLimits) -> str | None:
    """The limit that an error's text (a traceback, an exception) shows the code ran into, in words, or None."""
    if "MemoryError" in error:
        return f"memory limit: {limits.memory_mb} MiB"
    if "Resource temporarily unavailable" in error or "BlockingIOError" in error:
        return f"process limit: {limits.processes}"
    if "File too large" in error:  # Python ignores SIGXFSZ: the write fails instead
        return f"file size limit: {limits.file_mb} MiB"
    if "No space left on device" in error:
        return f"private folder full: {limits.work_mb} MiB"
    return None
