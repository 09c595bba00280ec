"""Several server processes on one port (`serve_env_workers`): real processes on loopback, played by OpenEnv's client."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import psutil
import pytest
from openenv.core.generic_client import GenericEnvClient

from envs.tictactoe import RandomPlayer
from wander.serve.workers import client_shares, session_shares

from .conftest import SETTINGS
from .test_server import assert_random_games_replay_locally, play
from .test_sessions import B, mcp_session, refusal


@contextlib.contextmanager
def workers_server(
    workers: int, max_sessions: int, per_client: int | None = None
) -> Iterator[tuple[str, subprocess.Popen]]:
    """`serve_env_workers` in a subprocess on a free loopback port (`per_client`: its max_sessions_per_client); yield
    its URL and process; stop it on exit."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = (
        "from wander import load_environment; from wander.serve.workers import serve_env_workers; "
        f"raise SystemExit(serve_env_workers(load_environment('tictactoe', **{SETTINGS!r}), port={port}, "
        f"workers={workers}, max_sessions={max_sessions}, max_sessions_per_client={per_client}))"
    )
    server = subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300  # two cores that may be busy with other work (seen: over 180 s)
        while True:
            try:
                httpx.get(url + "/health", timeout=1)
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline, "server did not start"
                time.sleep(0.2)
        yield url, server
    finally:
        if server.poll() is None:
            server.terminate()
            server.wait(timeout=180)


def test_the_cap_is_split_as_evenly_as_possible():
    assert session_shares(256, 2) == [128, 128]
    assert session_shares(5, 2) == [3, 2]
    assert sum(session_shares(1001, 7)) == 1001
    with pytest.raises(ValueError, match="--workers 3 needs 1 to --max-sessions"):
        session_shares(2, 3)


@pytest.mark.slow
def test_two_workers_play_200_concurrent_sessions_like_local_replays(local_env):
    with workers_server(workers=2, max_sessions=256, per_client=256) as (url, _):  # one client: this process
        assert httpx.get(url + "/wander/info").json()["max_sessions"] == 256  # the server's cap, not a share

        async def main():
            return await asyncio.gather(*(play(url, 5000 + i, RandomPlayer(seed=i)) for i in range(200)))

        games = asyncio.run(main())
    assert_random_games_replay_locally(local_env, games, first_seed=5000)


async def _open_sessions(url: str, attempts: int) -> tuple[list[GenericEnvClient], int]:
    """Open up to `attempts` sessions one after another, keeping them; the kept ones and the refusals."""
    kept, refused = [], 0
    for seed in range(attempts):
        client = GenericEnvClient(base_url=url)
        try:
            await client.reset(seed=seed)
            kept.append(client)
        except RuntimeError as exc:
            assert "CAPACITY_REACHED" in str(exc)
            refused += 1
            await client.close()
    return kept, refused


@pytest.mark.slow
def test_the_split_cap_holds_in_total_refuses_when_full_and_frees_slots_on_close():
    with workers_server(workers=2, max_sessions=6, per_client=6) as (url, _):
        assert httpx.get(url + "/wander/info").json()["max_sessions"] == 6

        async def main():
            # Connections land on either worker (the kernel's choice); each holds at most 3, so 6 sessions at once
            # means both took their share, and nothing beyond 6 is ever accepted.
            kept, refused = await _open_sessions(url, 40)
            assert (len(kept), refused) == (6, 34)
            for client in kept:
                await client.close()
            await asyncio.sleep(0.5)
            again, _ = await _open_sessions(url, 40)  # every slot freed: the whole cap is available again
            assert len(again) == 6
            for client in again:
                await client.close()

        asyncio.run(main())


def test_one_clients_share_is_split_like_the_cap_at_least_one_each():
    assert client_shares(128, 2) == [64, 64]
    assert client_shares(5, 2) == [3, 2]
    assert client_shares(1, 3) == [
        1,
        1,
        1,
    ]  # a worker that took none of a client's sessions would refuse them all


@pytest.mark.slow
def test_each_worker_holds_its_part_of_one_clients_share():
    with workers_server(workers=2, max_sessions=8) as (url, _):
        info = httpx.get(url + "/wander/info").json()
        assert (info["max_sessions"], info["max_sessions_per_client"]) == (
            8,
            4,
        )  # the server's, not a worker's

        async def main():
            # 20 tries from this client: the kernel spreads them over both workers, each holds 2 of them at most.
            kept, refused = await _open_sessions(url, 20)
            assert (len(kept), refused) == (4, 16)
            session, answer = mcp_session(url, B)  # another client still gets one
            assert session is not None, answer
            _, again = mcp_session(url, "127.0.0.1")
            assert (
                "holds its share of this worker process's 4 sessions (its part of the server's 8): 2 open"
                in refusal(again)
            )
            for client in kept:
                await client.close()

        asyncio.run(main())


@pytest.mark.slow
def test_sigterm_stops_every_worker_and_a_dead_worker_stops_the_server():
    with workers_server(workers=2, max_sessions=4) as (_, server):
        workers = psutil.Process(server.pid).children()
        assert len(workers) == 2
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=180) == 0  # limits, not timings: the cores may be busy with other work
        assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)
    with workers_server(workers=2, max_sessions=4) as (_, server):
        first, second = psutil.Process(server.pid).children()
        first.kill()  # a crashed worker: the supervisor stops the other and reports failure
        assert server.wait(timeout=180) == 1
        second.wait(timeout=60)
