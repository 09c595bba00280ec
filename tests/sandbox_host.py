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


def sandbox_processes() -> list[int]:
    """Processes of the sandbox's user still running (this test's own too when it runs as that user)."""
    return [p for p in processes_of(sandbox_user(), zombies=False) if p != os.getpid()]


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
