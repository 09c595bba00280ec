"""Steps per second of a served environment over loopback: 1 and 64 concurrent OpenEnv clients, p50/p99 latency.

The server is `wander env serve tictactoe --workers 2` in a subprocess. Clients are OpenEnv's async
`GenericEnvClient`, one WebSocket session each, playing whole tic-tac-toe games (the agent takes the first empty
cell) for a fixed time, spread over 2 client processes so one client interpreter is not the bottleneck. Server and
clients share this machine's cores, so the end-to-end rate is bounded by the clients' CPU as well as the server's;
the server's own CPU time per step (its processes, read from the OS) gives its capacity on its own: cores / CPU
per step. Each count runs `ROUNDS` rounds and reports their medians, because other work on the machine makes single
rounds swing.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import resource
import socket
import statistics
import subprocess
import sys
import time

import httpx
import psutil

SECONDS = 5.0
ROUNDS = 3
CORES = 2  # the target machine's: server capacity is quoted on it
# `WANDER_BENCH_SERVE_WORKERS=1` measures one server process (the flag is left out, so an older CLI runs too).
WORKERS = int(os.environ.get("WANDER_BENCH_SERVE_WORKERS", "2"))
CLIENT_PROCESSES = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _play(client, deadline: float, latencies: list[float], seed: int) -> int:
    steps = 0
    while time.time() < deadline:
        result = await client.reset(seed=seed)
        seed += 1
        while not result.done and time.time() < deadline:
            board = result.observation["state"]["board"]
            start = time.perf_counter()
            result = await client.step({"message": f"<move>{board.index('.')}</move>"})
            latencies.append(time.perf_counter() - start)
            steps += 1
    return steps


_START = None  # the client processes' barrier: each connects its sessions, then all start the round together


def _init_client_process(start) -> None:
    global _START
    _START = start
    # Import openenv once, when the process starts (seconds on busy cores), not inside a timed round.
    import openenv.core.generic_client  # noqa: F401


def _client_process(url: str, clients: int, seed: int) -> dict:
    """One client process: `clients` concurrent sessions, connected first, stepping for `SECONDS` once all are."""
    from openenv.core.generic_client import GenericEnvClient

    latencies: list[float] = []

    async def main() -> list[int]:
        sessions = [GenericEnvClient(base_url=url, connect_timeout_s=60) for _ in range(clients)]
        await asyncio.gather(*(s.connect() for s in sessions))
        _START.wait(timeout=300)
        deadline = time.time() + SECONDS
        try:
            return await asyncio.gather(
                *(_play(s, deadline, latencies, seed + 10_000 * i) for i, s in enumerate(sessions))
            )
        finally:
            await asyncio.gather(*(s.close() for s in sessions))

    before = resource.getrusage(resource.RUSAGE_SELF)
    steps = sum(asyncio.run(main()))
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"steps": steps, "latencies": latencies, "cpu_s": cpu}


def _server_cpu(server: psutil.Process) -> float:
    total = 0.0
    for proc in [server, *server.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def _round(pool, server: psutil.Process, url: str, clients: int, seed: int) -> dict:
    # Every client process takes one job (a process waiting at the barrier cannot take a second), some maybe none.
    procs = CLIENT_PROCESSES
    shares = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    cpu_before = _server_cpu(server)
    jobs = [(url, n, seed + 1_000_000 * i) for i, n in enumerate(shares)]
    parts = pool.starmap(_client_process, jobs, chunksize=1)
    server_cpu = _server_cpu(server) - cpu_before
    steps = sum(p["steps"] for p in parts)
    latencies = [x for p in parts for x in p["latencies"]]
    cuts = statistics.quantiles(latencies, n=100)
    return {
        "steps_per_s": steps / SECONDS,
        "p50_ms": cuts[49] * 1000,
        "p99_ms": cuts[98] * 1000,
        "server_cpu_ms_per_step": server_cpu / steps * 1000,
        "client_cpu_ms_per_step": sum(p["cpu_s"] for p in parts) / steps * 1000,
    }


def _measure(pool, server: psutil.Process, url: str, clients: int) -> dict:
    rounds = [_round(pool, server, url, clients, seed=r * 100_000_000) for r in range(ROUNDS)]
    out: dict = {"clients": clients, "rounds": ROUNDS, "seconds_per_round": SECONDS}
    for key in rounds[0]:
        out[key] = round(statistics.median(r[key] for r in rounds), 3)
    out["steps_per_s_rounds"] = [round(r["steps_per_s"], 1) for r in rounds]
    # What the server alone could sustain on the machine's cores, were the clients elsewhere.
    out["server_capacity_steps_per_s"] = round(CORES * 1000 / out["server_cpu_ms_per_step"], 1)
    return out


def _wait_until_up(url: str, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + 180  # the CLI imports the whole stack first: slow on busy cores
    while True:
        try:
            httpx.get(url + "/health", timeout=1)
            return
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"wander env serve did not come up at {url}") from None
            time.sleep(0.2)


def run() -> dict:
    """Start `wander env serve tictactoe --workers 2` on a free port, measure 1 and 64 clients, stop it."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "wander.cli", "env", "serve", "tictactoe", "--port", str(port)]
    if WORKERS > 1:
        cmd += ["--workers", str(WORKERS)]
    server = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    # Spawned, not forked: the client processes start clean and import only openenv's client.
    context = multiprocessing.get_context("spawn")
    pool = context.Pool(
        CLIENT_PROCESSES, initializer=_init_client_process, initargs=(context.Barrier(CLIENT_PROCESSES),)
    )
    try:
        _wait_until_up(url, server)
        watched = psutil.Process(server.pid)
        out = {f"clients_{n}": _measure(pool, watched, url, n) for n in (1, 64)}
    finally:
        pool.terminate()
        server.terminate()
        try:
            server.wait(timeout=60)  # the workers close their sessions first: slow on busy cores
        except subprocess.TimeoutExpired:
            for proc in psutil.Process(server.pid).children(recursive=True):
                proc.kill()
            server.kill()
            server.wait()
    out["server_workers"] = WORKERS
    out["client_processes"] = CLIENT_PROCESSES
    out["target"] = "64 clients >= 5,000 steps/s on 2 cores"
    return out


if __name__ == "__main__":
    print(run())
