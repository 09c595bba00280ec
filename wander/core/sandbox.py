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
  the output read is capped at `output_bytes` (the run is killed past it) and the run at `wall_seconds`; the process
  limit counts this sandbox's processes only (it is set inside the sandbox's own user namespace), so a neighbour's
  fork bomb cannot fail a run;
- **a narrow kernel surface**: no capabilities, no nested user namespace (`--disable-userns`), and a seccomp filter
  (`wander.core.seccomp`) refusing ptrace, namespaces, mounts, bpf, perf, keyrings, io_uring and the like;
- **one process tree, killed at the end**: the code runs in its own PID namespace, so when the run ends, by itself
  or killed, the kernel kills every process left in it (a double-forked daemon included);
- **an unprivileged user** where the machine allows: run as root, the sandbox drops to `nobody` before bwrap; as
  any other user it runs as that user.

A run can also be talked to while it runs (`Sandbox.open`: lines to its stdin, lines from its stdout, within the same
limits), so a judge can keep what it compares with outside the sandbox (envs/coding/execution.py).

Executions may run in parallel threads, at most `parallel` at once. This module is the library's one way to run
code; an env that runs code (envs/code) owns a `Sandbox`.
"""

from __future__ import annotations

import os
import pwd
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from wander.core.sandbox_process import Execution, SandboxLimits, SandboxProcess, limit_hit
from wander.core.seccomp import filter_program

BWRAP = "bwrap"
UNPRIVILEGED = "nobody"
__all__ = ["Execution", "Sandbox", "SandboxLimits", "SandboxProcess", "SandboxUnavailable", "limit_hit"]


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
                argv = self._bwrap(staged, filter_fd, command)
                process = SandboxProcess(self.limits, self.python, self.user, argv, filter_fd)
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


def _unprivileged_user() -> pwd.struct_passwd | None:
    """`nobody` when this process is root and the machine has it; None = run as this process's own user."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(UNPRIVILEGED)
    except KeyError:
        return None
