"""A warm process that runs stage commands with their libraries already imported: `WANDER_STAGE_SERVER=SOCKET`.

Every stage is a process (`python -m tasks.<stage>`) that spends 5-8 s importing torch, transformers, TRL, MLflow and
Great Expectations before its first line of work; a pipeline of 8 stages pays that 8 times. With
`python -m tasks.runtime.stage_server SOCKET` running and `WANDER_STAGE_SERVER=SOCKET` exported, a stage command
imports `tasks` (the package, ~70 ms), hands its command line, working directory, environment and standard streams
to the server and waits. The server forks a child (the libraries are in its memory already), which drops the
project's own modules (its code is read from the command's directory, as a fresh process would), takes the
command's environment, streams and directory, and runs the stage module as `__main__`.

The command stays the stage's process for everything around it: a signal it gets (SIGTERM, SIGINT, SIGHUP) is passed
to the stage's process group, its exit status is the stage's (a stage killed by a signal kills it with the same),
and when it ends without a word (SIGKILL) the server stops the stage's group: SIGTERM, then SIGKILL after
`KILL_AFTER` seconds. Under DVC it watches DVC as a stage does. A command the server cannot run the same way runs
itself, as without a server: interpreter options (`python -X importtime -m ...`), another Python, or environment
variables read when the libraries load (`IMPORT_TIME_ENV`) that differ from the server's.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import importlib
import io
import json
import os
import re
import runpy
import selectors
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from wander.core.process_tree import signal_group, stop_when_gone

SERVER_ENV = "WANDER_STAGE_SERVER"
STAGE_MODULE = re.compile(r"tasks\.\w+")
# What a stage imports before its work, in the order a stage does (`python -X importtime -m tasks.grpo`).
PRELOAD = (
    "torch",
    "transformers",
    "datasets",
    "peft",
    "trl",
    "mlflow",
    "great_expectations",
    "pydantic",
    "yaml",
)
# Environment variables read when those libraries or the interpreter start: a command whose values differ runs itself.
IMPORT_TIME_ENV = (
    "PYTHON",
    "OMP_",
    "MKL_",
    "KMP_",
    "HF_",
    "TRANSFORMERS",
    "TORCH",
    "PYTORCH",
    "CUDA",
    "TOKENIZERS",
    "LD_",
)
NOT_IMPORT_TIME = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
# The project's packages: the server's copies are dropped in a child, which imports the command's own.
PROJECT_PACKAGES = ("tasks", "wander", "envs", "flows", "services", "bench", "tests")
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
KILL_AFTER = 15.0  # seconds a stage whose command vanished gets to unwind (the stage's own grace is 10)
MESSAGE_BYTES = 1 << 20


def import_time_env(env: dict[str, str]) -> dict[str, str]:
    """The variables of `env` that the interpreter or the preloaded libraries read as they load."""
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME_ENV) and k not in NOT_IMPORT_TIME}


def request_problem(request: dict, server_env: dict[str, str]) -> str | None:
    """Why the server cannot run `request` as a fresh process would, or None."""
    if os.path.realpath(request["executable"]) != os.path.realpath(sys.executable):
        return f"another Python ({request['executable']})"
    command_env = import_time_env(request["env"])
    differ = sorted(k for k in set(command_env) | set(server_env) if command_env.get(k) != server_env.get(k))
    return f"environment read at import differs: {', '.join(differ)}" if differ else None


# --- the command's side ----------------------------------------------------------------------------------------------


def run_through_server(path: str) -> int | None:
    """Run this `python -m tasks.<stage>` command in the server at `path`; its exit status, or None to run here."""
    argv = sys.orig_argv
    if len(argv) < 3 or argv[1] != "-m":  # interpreter options: they would not apply in the server's child
        return None
    if not STAGE_MODULE.fullmatch(argv[2]):  # tasks.runtime.stage_server itself, a helper module
        return None
    request = {
        "executable": sys.executable,
        "module": argv[2],
        "argv": argv[3:],
        "cwd": os.getcwd(),
        "path": sys.path,
        "env": dict(os.environ),
    }
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(path)
        socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
        answer = json.loads(conn.recv(MESSAGE_BYTES) or b'{"refused": "the server closed"}')
    except OSError as e:
        print(f"{SERVER_ENV}={path}: {e}; the stage runs in its own process", file=sys.stderr)
        conn.close()
        return None
    if "refused" in answer:
        print(
            f"the stage server does not run this command ({answer['refused']}): it runs itself",
            file=sys.stderr,
        )
        conn.close()
        return None

    def forward(signum: int, frame: object) -> None:
        with contextlib.suppress(OSError):
            conn.send(json.dumps({"signal": signum}).encode())

    for sig in FORWARDED:
        signal.signal(sig, forward)
    if "DVC_STAGE" in os.environ:  # as a stage does: nobody records the outputs once DVC is gone
        stop_when_gone(grace=KILL_AFTER)
    data = conn.recv(MESSAGE_BYTES)
    code = json.loads(data)["exit"] if data else 1
    if code < 0:  # killed by a signal: so is this process, as its parent expects
        sys.stdout.flush()
        with contextlib.suppress(OSError, ValueError):  # SIGKILL has no handler to reset
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


# --- the server's side -----------------------------------------------------------------------------------------------


class Server:
    """Accepts commands on a socket; forks a child per command; relays signals in and exit statuses out."""

    def __init__(self, path: str, env: dict[str, str], preloaded_env: dict[str, str]) -> None:
        self.env = import_time_env(env)
        self.preloaded_env = preloaded_env  # what the libraries set in os.environ as they loaded (torch does)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self.listener.bind(path)
        self.listener.listen(64)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.children: dict[int, socket.socket] = {}  # pid -> its command's connection
        self.kill_at: dict[int, float] = {}  # pid -> when a stage whose command vanished gets SIGKILL
        self.stopping = False

    def serve(self) -> dict | None:
        """Serve until stopped (None); in a forked child, return its request."""
        while not self.stopping or self.children:
            for key, _ in self.selector.select(timeout=0.1):
                if key.fileobj is self.listener:
                    request = self.accept()
                else:
                    request = None
                    self.relay(key.fileobj)  # type: ignore[arg-type]
                if request is not None:
                    return request
            self.reap()
        return None

    def accept(self) -> dict | None:
        """Take one command: refuse it, or fork its child (which gets the request back)."""
        conn, _ = self.listener.accept()
        try:
            data, fds, _, _ = socket.recv_fds(conn, MESSAGE_BYTES, 3)
            request = json.loads(data)
        except (OSError, ValueError):
            conn.close()
            return None
        problem = request_problem(request, self.env)
        if problem is not None or self.stopping or len(fds) != 3:
            with contextlib.suppress(OSError):
                conn.send(json.dumps({"refused": problem or "stopping"}).encode())
            conn.close()
            for fd in fds:
                os.close(fd)
            return None
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self.become_child(conn, fds)
            return {**request, "env": {**self.preloaded_env, **request["env"]}}
        for fd in fds:
            os.close(fd)
        self.children[pid] = conn
        self.selector.register(conn, selectors.EVENT_READ)
        with contextlib.suppress(OSError):
            conn.send(json.dumps({"pid": pid}).encode())
        return None

    def become_child(self, conn: socket.socket, fds: list[int]) -> None:
        """Let go of everything the server holds; take the command's streams; lead a process group of its own."""
        self.selector.close()
        self.listener.close()
        conn.close()
        for other in self.children.values():
            other.close()
        self.children.clear()
        for sig in (*FORWARDED, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        os.setpgid(0, 0)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)

    def relay(self, conn: socket.socket) -> None:
        """A message from a command: a signal to pass on, or its end (SIGTERM now, SIGKILL later)."""
        pid = next(p for p, c in self.children.items() if c is conn)
        try:
            data = conn.recv(MESSAGE_BYTES)
        except OSError:
            data = b""
        if data:
            signal_group(pid, json.loads(data)["signal"])
            return
        self.selector.unregister(conn)
        signal_group(pid, signal.SIGTERM)
        self.kill_at.setdefault(pid, time.monotonic() + KILL_AFTER)

    def reap(self) -> None:
        """Report each ended child's status to its command; SIGKILL the stages whose time to unwind is up."""
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = self.children.pop(pid, None)
            self.kill_at.pop(pid, None)
            signal_group(pid, signal.SIGKILL)  # stragglers of its group, as stop_group does
            if conn is not None:
                with contextlib.suppress(OSError, KeyError, ValueError):
                    self.selector.unregister(conn)
                with contextlib.suppress(OSError):
                    conn.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
                conn.close()
        now = time.monotonic()
        for pid, when in list(self.kill_at.items()):
            if now >= when:
                signal_group(pid, signal.SIGKILL)

    def stop(self, signum: int, frame: object) -> None:
        """Stop taking commands; stop the running stages as their commands would."""
        self.stopping = True
        for pid in self.children:
            signal_group(pid, signal.SIGTERM)
            self.kill_at.setdefault(pid, time.monotonic() + KILL_AFTER)


def run_request(request: dict) -> int:
    """In the forked child: become the command (its directory, environment, path, streams), run its module as
    `__main__`; its exit status."""
    for name in [m for m in sys.modules if m.split(".")[0] in PROJECT_PACKAGES]:
        del sys.modules[name]
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ.pop(SERVER_ENV)  # the stage's own commands (ranks, helpers) start as fresh processes
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))  # as a fresh process reads it
    sys.path[:] = request["path"]
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), line_buffering=os.isatty(1), write_through=unbuffered
    )
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), errors="backslashreplace", line_buffering=True
    )
    sys.argv = ["-m", *request["argv"]]
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = exit_code(e)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    # The interpreter's own exit, less its teardown of every object: that writes to each page the child shares
    # with the server, which copies them all (3 s for a stage's `--help`).
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    return code


def exit_code(e: SystemExit) -> int:
    """The status `sys.exit(e.code)` leaves a process with (a message is written to stderr and gives 1)."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    print(e.code, file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    """Import the stages' libraries, then serve commands on SOCKET until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(
        prog="python -m tasks.runtime.stage_server", description=__doc__.splitlines()[0]
    )
    parser.add_argument("socket", type=Path, help="the socket's path (what WANDER_STAGE_SERVER names)")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    stop_when_gone()  # a server outlives nobody who started it (its SIGTERM stops it as the handler below says)
    for name in PRELOAD:
        importlib.import_module(name)
    preloaded_env = {k: v for k, v in os.environ.items() if k not in env}
    server = Server(str(args.socket), env, preloaded_env)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, server.stop)
    print(f"stage server ready on {args.socket}", flush=True)
    gc.freeze()  # the libraries' objects: a child's garbage collections leave their pages shared
    request = server.serve()
    if request is None:
        return 0
    os._exit(run_request(request))


if __name__ == "__main__":
    sys.exit(main())
