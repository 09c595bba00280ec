"""Steps per second of a served environment over loopback: 1 and 64 concurrent OpenEnv clients, p50/p99 latency.

The server (`wander env serve`'s app: openenv's own server) runs in a subprocess so it has its own interpreter;
clients are OpenEnv's async `GenericEnvClient`, one WebSocket session each, playing whole tic-tac-toe games
(the agent takes the first empty cell) for a fixed time. Both share this machine's cores.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time

import httpx
from openenv.core.generic_client import GenericEnvClient  # at import: importing openenv takes seconds

SECONDS = 5.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _client(url: str, deadline: float, latencies: list[float], seed: int) -> int:
    steps = 0
    async with GenericEnvClient(base_url=url) as client:
        while time.perf_counter() < deadline:
            result = await client.reset(seed=seed)
            seed += 1
            while not result.done and time.perf_counter() < deadline:
                board = result.observation["state"]["board"]
                start = time.perf_counter()
                result = await client.step({"message": f"<move>{board.index('.')}</move>"})
                latencies.append(time.perf_counter() - start)
                steps += 1
    return steps


def _measure(url: str, clients: int) -> dict:
    latencies: list[float] = []

    async def main() -> list[int]:
        deadline = time.perf_counter() + SECONDS
        return await asyncio.gather(*(_client(url, deadline, latencies, 10_000 * i) for i in range(clients)))

    start = time.perf_counter()
    steps = sum(asyncio.run(main()))
    wall = time.perf_counter() - start
    cuts = statistics.quantiles(latencies, n=100)
    return {
        "clients": clients,
        "steps": steps,
        "steps_per_s": round(steps / wall, 1),
        "p50_ms": round(cuts[49] * 1000, 2),
        "p99_ms": round(cuts[98] * 1000, 2),
    }


def run() -> dict:
    """Start `wander env serve tictactoe` on a free port, measure 1 and 64 clients, stop it."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "flows.cli", "env", "serve", "tictactoe", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        deadline = time.monotonic() + 180  # the CLI imports the whole stack first: slow on busy cores
        while True:
            try:
                httpx.get(url + "/health", timeout=1)
                break
            except httpx.TransportError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"wander env serve did not come up at {url}") from None
                time.sleep(0.2)
        out = {f"clients_{n}": _measure(url, n) for n in (1, 64)}
    finally:
        server.terminate()
        server.wait(timeout=10)
    out["target"] = "64 clients >= 5,000 steps/s on 2 cores"
    return out


if __name__ == "__main__":
    print(run())
