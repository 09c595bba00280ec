"""Serve one environment from several processes on one port (`wander env serve --workers N`).

A wander step is CPU-bound Python, so one server process steps on one core. Here N worker processes, forked after
the environment is built, each run openenv's server (`create_env_app`) on their own event loop and their own
listening socket, all bound to the same port with `SO_REUSEPORT`: the kernel spreads new connections evenly over
them. A session is one WebSocket connection, so the worker that accepted it owns it to the end; no state is shared
between workers. Each worker caps its own sessions at its share of `max_sessions` (the shares add up to it, so the
server as a whole never holds more) and one client's at its part of `max_sessions_per_client` (split the same way,
at least one each), refuses beyond that with OpenEnv's `CAPACITY_REACHED`, and reaps its own idle sessions. The
supervisor (this process) only waits: if a worker dies it stops the others and exits non-zero, for a process manager
to restart the whole server.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
from typing import Any

from wander.core.environment import Environment
from wander.core.process_tree import stop_when_gone
from wander.serve.limits import MAX_SESSIONS, per_client_limit


def session_shares(max_sessions: int, workers: int) -> list[int]:
    """Each worker's session cap: `max_sessions` split as evenly as possible, every worker at least one."""
    if not 1 <= workers <= max_sessions:
        raise ValueError(f"--workers {workers} needs 1 to --max-sessions ({max_sessions}) workers")
    return _split(max_sessions, workers)


def client_shares(per_client: int, workers: int) -> list[int]:
    """Each worker's cap on one client's sessions: `per_client` split like `session_shares`, at least one each."""
    # At least one: a worker that refused a client outright would refuse every connection of it that it accepts.
    return [max(1, part) for part in _split(per_client, workers)]


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def reuseport_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` listening sockets bound to one port with SO_REUSEPORT (port 0: the one the first socket got)."""
    if not hasattr(socket, "SO_REUSEPORT"):
        raise ValueError(
            "--workers needs SO_REUSEPORT, which this platform lacks (Linux and the BSDs have it)"
        )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
            port = sock.getsockname()[1]
            sock.listen(2048)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _run_worker(
    env: Environment,
    sockets: list[socket.socket],
    index: int,
    share: int,
    client_share: int,
    app_options: dict[str, Any],
    supervisor: int,
) -> None:
    """One worker process: openenv's server for `env` on its own socket, capped at its share of the sessions (and of
    one client's)."""
    import uvicorn

    from wander.serve.server import create_env_app, uvicorn_options

    # The other workers' sockets came along with the fork; holding them would keep a dead worker's port share open.
    for i, sock in enumerate(sockets):
        if i != index:
            sock.close()
    # The supervisor's own signal handling came along too; uvicorn handles SIGTERM and SIGINT itself (a graceful
    # shutdown) and re-raises the signal once done, which should then end this process quietly.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # A supervisor killed outright (SIGKILL) must not leave its workers serving; its pid, taken before the fork,
    # covers a supervisor killed before this line runs too (the default, the parent, would then be init).
    stop_when_gone(supervisor)
    options = {
        **app_options,
        "max_sessions": share,
        "max_sessions_per_client": client_share,
        "reset_stream": index,  # each worker its own seed stream
    }
    app = create_env_app(env, **options)
    config = uvicorn.Config(app, log_level="info", **uvicorn_options(options))
    try:
        uvicorn.Server(config).run(sockets=[sockets[index]])
    except KeyboardInterrupt:
        pass


def serve_env_workers(
    env: Environment,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    workers: int = 2,
    max_sessions: int = MAX_SESSIONS,
    max_sessions_per_client: int | None = None,
    **app_options: Any,
) -> int:
    """Serve `env` from `workers` processes sharing `host:port` until interrupted; the exit status (0: stopped)."""
    shares = session_shares(max_sessions, workers)
    per_client = per_client_limit(max_sessions, max_sessions_per_client)
    sockets = reuseport_sockets(host, port, workers)
    # /wander/info reports the whole server's caps, which a client sizes its sessions against.
    app_options = {
        **app_options,
        "reported_max_sessions": max_sessions,
        "reported_max_sessions_per_client": per_client,
    }
    # Forked, not spawned: the workers share the built environment (datasets included) without rebuilding it.
    context = multiprocessing.get_context("fork")
    procs = [
        context.Process(
            target=_run_worker,
            args=(env, sockets, i, share, client_share, app_options, os.getpid()),
            name=f"wander-serve-{i}",
            daemon=True,
        )
        for i, (share, client_share) in enumerate(
            zip(shares, client_shares(per_client, workers), strict=True)
        )
    ]
    stopping = False

    def stop(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True
        raise KeyboardInterrupt

    previous = signal.getsignal(signal.SIGTERM)
    try:
        for proc in procs:
            proc.start()
        signal.signal(signal.SIGTERM, stop)  # after the forks, so the workers do not inherit it
        for sock in sockets:  # the workers hold their own copies
            sock.close()
        multiprocessing.connection.wait([proc.sentinel for proc in procs])
    except KeyboardInterrupt:
        stopping = True
    finally:
        signal.signal(signal.SIGTERM, previous)
        dead = [proc.name for proc in procs if proc.exitcode is not None]
        _stop(procs)
    if not stopping:
        print(f"worker(s) {dead} exited; stopped the server")
        return 1
    return 0


def _stop(procs: list[multiprocessing.Process]) -> None:
    for proc in procs:
        if proc.is_alive():
            proc.terminate()  # SIGTERM: uvicorn closes its connections and exits
    for proc in procs:
        proc.join(timeout=10)
        if proc.is_alive():
            proc.kill()
            proc.join()
