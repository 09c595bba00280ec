"""A server process that outlives the command that started it: a pid file to find it again, a log file, a health
check to wait on, a stop that leaves nothing behind.

Each server runs as the leader of a process group of its own (`start_group`), so a stop reaches the workers it
forked (uvicorn's, for instance) and a SIGKILL after the grace period ends whatever is left of the group.
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import signal
import subprocess
import sysconfig
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from wander.core.logs import redact_url
from wander.core.process_tree import alive, start_group

POLL_SECONDS = 0.25  # between health checks while a server starts, and between looks while it stops
STOP_GRACE_SECONDS = 30.0  # a clean shutdown (PostgreSQL's checkpoint, SeaweedFS's flush) before SIGKILL

EXTRA_HINT = "`make services` installs it (pip install -e '.[services]')"
Check = Callable[[], "str | None"]  # None when healthy, else what is wrong, in a few words


class ServiceError(RuntimeError):
    """A service that cannot start or does not answer; the message is one line, credentials redacted."""


@dataclasses.dataclass(frozen=True)
class Daemon:
    """How to run one server: its command, environment, OS user, files, and the signal that stops it cleanly."""

    name: str
    argv: Sequence[str]
    env: Mapping[str, str]
    pid_file: Path
    log_file: Path
    user: str | None = None  # run as this OS user (we are root); None: as ourselves
    stop_signal: int = signal.SIGTERM
    signal_group: bool = True  # False: only the leader gets stop_signal (it stops its own children in order)


@dataclasses.dataclass(frozen=True)
class Service:
    """One service: the server to run, the URI it answers at (no password in it; a user name, which `redact_url`
    masks too), what to do before it starts and once it answers, and how to tell it answers."""

    name: str
    uri: str
    daemon: Daemon
    health: Check
    # What to wait on before `provision`, where `health` needs what provision makes.
    ready: Check | None = None
    prepare: Callable[[], None] = lambda: None
    provision: Callable[[], None] = lambda: None
    install_hint: str = EXTRA_HINT  # what installs the server's program where it is missing


def program(name: str) -> Path:
    """An executable of this Python environment's scripts folder (the venv's bin/), whether installed or not."""
    return Path(sysconfig.get_path("scripts")) / name


def running_pid(daemon: Daemon) -> int | None:
    """The pid of the daemon's server if it runs (its pid file names a live process running its program)."""
    try:
        pid = int(daemon.pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if not alive(pid):
        return None
    try:  # a pid reused by another program after a reboot or a crash is not ours
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return pid if Path(daemon.argv[0]).name.encode() in b" ".join(cmdline) else None


def start(daemon: Daemon) -> int:
    """Start the daemon's server in the background, its output appended to its log; write its pid file."""
    daemon.log_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    daemon.pid_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    popen: dict = {}
    if daemon.user is not None:
        account = pwd.getpwnam(daemon.user)
        popen = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
    fd = os.open(daemon.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "ab") as log:
        process = start_group(
            daemon.argv,
            env=dict(daemon.env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd="/",
            **popen,
        )
    daemon.pid_file.write_text(f"{process.pid}\n")
    return process.pid


def stop(daemon: Daemon, grace: float = STOP_GRACE_SECONDS) -> bool:
    """Stop the daemon's server and every process of its group (the stop signal, `grace` seconds, then SIGKILL);
    remove its pid file; False if it was not running."""
    pid = running_pid(daemon)
    if pid is not None:
        _signal(pid, daemon.stop_signal, group=daemon.signal_group)
        deadline = time.monotonic() + grace
        while group_members(pid) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS / 5)
        if group_members(pid):
            _signal(pid, signal.SIGKILL, group=True)
            while group_members(pid):
                time.sleep(POLL_SECONDS / 5)
    daemon.pid_file.unlink(missing_ok=True)
    return pid is not None


def _signal(pid: int, sig: int, group: bool) -> None:
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def group_members(pgid: int) -> list[int]:
    """The live processes (zombies excluded) of process group `pgid`, read from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _ppid, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(group) == pgid and state != "Z":
            members.append(int(stat.parent.name))
    return members


def wait_until_healthy(service: Service, pid: int | None, timeout: float, check: Check) -> None:
    """Poll `check` until it passes; raise if the service's server exits or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while (problem := check()) is not None:
        if pid is not None and not alive(pid):
            raise ServiceError(
                f"{service.name}: exited while starting ({problem}): see {service.daemon.log_file}"
            )
        if time.monotonic() > deadline:
            uri = redact_url(service.uri)
            raise ServiceError(f"{service.name}: no answer at {uri} after {timeout:.0f} s: {problem}")
        time.sleep(POLL_SECONDS)


def short(error: BaseException) -> str:
    """An exception as a few words on one line: its type and the first line of its message."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
