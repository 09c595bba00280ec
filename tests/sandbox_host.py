"""What the sandbox tests check on the host: the processes the sandbox's user still runs after a test, and a
server on the host's 127.0.0.1 that records every connection it gets (tests/wander/core/test_sandbox.py and
tests/envs/coding/test_attacks.py)."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from wander.core.sandbox import Sandbox


def processes_of(user: int, zombies: bool) -> list[int]:
    """Processes of user `user`: the running ones, or the zombies (ended, waiting for their parent to reap them)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            status = (entry / "status").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields and int(fields["Uid"].split()[0]) == user:
            if fields["State"].strip().startswith("Z") == zombies:
                found.append(int(entry.name))
    return found


def sandbox_user() -> int:
    """The user the sandbox runs code as."""
    user = Sandbox().user
    return user.pw_uid if user else os.getuid()


def parent_of(pid: int) -> int | None:
    """The parent of process `pid`, or None once it has ended."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:")), None)


def a_neighbours(pid: int) -> bool:
    """Whether process `pid` descends from another xdist worker (a child of this worker's parent other than this
    worker): that worker's sandboxes run as the same user at the same time and are its own tests' business. An
    orphan (reparented to init) and a descendant of this worker are not a neighbour's."""
    me, controller = os.getpid(), os.getppid()
    while pid not in (None, 0, 1, me):
        parent = parent_of(pid)
        if parent == controller:
            return True
        pid = parent
    return False


def sandbox_processes() -> list[int]:
    """Processes of the sandbox's user still running that this test may have started (this test's own too when it
    runs as that user; not a neighbouring worker's)."""
    return [
        p for p in processes_of(sandbox_user(), zombies=False) if p != os.getpid() and not a_neighbours(p)
    ]


@pytest.fixture(autouse=True)
def nothing_left_running():
    """Fails the test when a process of the sandbox's user that it started is still running 3 s after it."""
    before = set(sandbox_processes())
    yield
    deadline = time.monotonic() + 3
    while (left := set(sandbox_processes()) - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"sandbox processes outlived their run: {sorted(left)}"


@contextmanager
def loopback_server(seconds: float) -> Iterator[tuple[int, list]]:
    """A server on the host's 127.0.0.1 for `seconds`: its port, and the connections it accepted (filled as they
    come; read it after the block)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    accepted: list = []

    def listen() -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                accepted.append(server.accept())
            except TimeoutError:
                continue

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    try:
        yield server.getsockname()[1], accepted
    finally:
        listener.join()
        server.close()
