"""Run untrusted code (a model's) so that nothing it does reaches the machine: bubblewrap namespaces plus limits.

    sandbox = Sandbox(SandboxLimits(wall_seconds=5))
    result = sandbox.run(["python3", "main.py"], files={"main.py": code})
    result.ok, result.stdout, result.reason  # reason: why it failed, in words ("wall-clock timeout after 5 s")

Each execution runs under `bwrap` (Debian's `bubblewrap`; `make sandbox` installs it) in namespaces of its own:
- **no network**: a network namespace with only its own loopback (a server on the host's 127.0.0.1 is not there);
- **nothing of the host but the system**: `/usr` read-only (the system's Python and its standard library), a
  private `/proc` (its own processes only) and `/dev`; no `/etc`, no `/home` or `/root`, no project, no venv;
- **no variables**: the environment is cleared (PATH, HOME=/work and LANG only: no secret such as OPENAI_API_KEY);
- **a small private writable folder**: `/work`, a tmpfs of `work_mb`, where `files` are written; everything else is
  read-only or absent, so a symlink can only point inside the sandbox's own tree;
- **limits** (setrlimit, inherited): CPU seconds, address space, processes, open files, file size, no core dumps;
  the output read is capped at `output_bytes` (the run is killed past it) and the run at `wall_seconds`;
- **one process tree, killed at the end**: the code runs in its own PID namespace, so when the run ends, by itself
  or killed, the kernel kills every process left in it (a double-forked daemon included);
- **an unprivileged user** where the machine allows: run as root, the sandbox drops to `nobody` before bwrap
  (so the process limit counts only the sandboxes' processes); as any other user it runs as that user.

Executions may run in parallel threads, at most `parallel` at once. This module is the library's one way to run
code; an env that runs code (envs/code) owns a `Sandbox`.
"""

from __future__ import annotations

import os
import pwd
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from wander.core.seccomp import filter_program

BWRAP = "bwrap"
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
UNPRIVILEGED = "nobody"
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


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot make namespaces on this machine."""


class Sandbox:
    """Runs commands isolated from the machine, each in a fresh sandbox, at most `parallel` at once."""

    def __init__(self, limits: SandboxLimits | None = None, parallel: int = 4):
        if parallel < 1:
            raise ValueError(f"parallel must be at least 1, got {parallel}")
        self.limits = limits or SandboxLimits()
        self.slots = threading.BoundedSemaphore(parallel)
        if shutil.which(BWRAP) is None:
            raise SandboxUnavailable(
                "no `bwrap` on PATH: the sandbox runs code under bubblewrap; install it with `make sandbox` "
                "(Debian's bubblewrap package)"
            )
        self.user = _unprivileged_user()
        # The reaper's Python: the system's, which the unprivileged user may run (a venv under /root it may not).
        self.python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
        self.seccomp = filter_program()

    def run(self, command: Sequence[str], files: dict[str, str] | None = None, stdin: str = "") -> Execution:
        """Run `command` in /work, after writing `files` (relative path -> text) there."""
        with self.open(command, files) as process:
            process.send(stdin, close=True)
            process.wait()
        return process.execution

    @contextmanager
    def open(self, command: Sequence[str], files: dict[str, str] | None = None) -> Iterator[SandboxProcess]:
        """Start `command` as `run` does and talk to it (`send`, `readline`) inside the block; its `execution`
        after. The run is killed when the block ends, if it has not ended by then."""
        with self.slots, tempfile.TemporaryDirectory(prefix="wander-sandbox-") as tmp:
            staged = Path(tmp) / "files"
            staged.mkdir()
            for name, text in (files or {}).items():
                path = (staged / name).resolve()
                if staged.resolve() not in path.parents:
                    raise ValueError(f"sandbox file {name!r} is outside the working folder")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            filter_path = Path(tmp) / "seccomp.bpf"
            filter_path.write_bytes(self.seccomp)
            if self.user is not None:
                os.chown(tmp, self.user.pw_uid, self.user.pw_gid)
                for path in [staged, *staged.rglob("*")]:
                    os.chown(path, self.user.pw_uid, self.user.pw_gid)
            filter_fd = os.open(filter_path, os.O_RDONLY)
            try:
                process = SandboxProcess(self, self._bwrap(staged, filter_fd, command), filter_fd)
            finally:
                os.close(filter_fd)
            try:
                yield process
            finally:
                process.finish()

    def _bwrap(self, staged: Path, filter_fd: int, command: Sequence[str]) -> list[str]:
        """The bwrap command line: namespaces, a read-only system, /work with the staged files, no variables."""
        limits = self.limits
        # The process limit is set inside the sandbox's own user namespace (by its shell), not before bwrap: the
        # kernel counts a user namespace's processes against the limit its creator had, so a limit set outside
        # would count every sandbox's processes together and one run's fork bomb would fail its neighbours.
        inside = f'ulimit -p {limits.processes}; cp -R /staged/. /work/ 2>/dev/null; exec "$@"'
        return [
            BWRAP,
            *("--unshare-all", "--unshare-user", "--disable-userns", "--seccomp", str(filter_fd)),
            *("--die-with-parent", "--new-session", "--cap-drop", "ALL"),
            *("--hostname", "sandbox"),
            *("--ro-bind", "/usr", "/usr"),
            *("--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib"),
            *("--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin"),
            *("--proc", "/proc", "--dev", "/dev"),
            *("--size", str(limits.work_mb * 2**20), "--tmpfs", "/work"),
            *("--size", str(2**20), "--tmpfs", "/tmp"),
            *("--ro-bind", str(staged), "/staged"),
            *("--remount-ro", "/"),  # the sandbox's own root too: only /work and /tmp take writes
            *("--chdir", "/work", "--clearenv"),
            *(
                "--setenv",
                "PATH",
                "/usr/bin:/bin",
                "--setenv",
                "HOME",
                "/work",
                "--setenv",
                "LANG",
                "C.UTF-8",
            ),
            "--",
            *("/bin/sh", "-c", inside, "sandbox"),
            *command,
        ]


class SandboxProcess:
    """One running sandbox: lines to its stdin, lines from its stdout, all within the run's wall-clock time and
    output budget; `execution` once `Sandbox.open`'s block has ended."""

    def __init__(self, sandbox: Sandbox, argv: list[str], filter_fd: int):
        self.limits, self.start = sandbox.limits, time.monotonic()
        self.deadline = self.start + self.limits.wall_seconds
        self.timed_out = False
        self.execution: Execution | None = None
        self.proc = subprocess.Popen(
            [sandbox.python, "-I", "-S", "-c", REAPER, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=self._limit,
            pass_fds=(filter_fd,),
            user=sandbox.user.pw_uid if sandbox.user else None,
            group=sandbox.user.pw_gid if sandbox.user else None,
            extra_groups=[] if sandbox.user else None,
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


def _unprivileged_user() -> pwd.struct_passwd | None:
    """`nobody` when this process is root and the machine has it; None = run as this process's own user."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(UNPRIVILEGED)
    except KeyError:
        return None
