"""Fuzzing the served environment: schemathesis over its OpenAPI routes, a seeded fuzz over WebSocket frames, and
the `wander env serve` process under thousands of raw hostile requests (tests/wander/fuzz_http.py).

None may get a 5xx or take the server down; every answer to bad input is a 4xx or an OpenEnv error frame.
"""

from __future__ import annotations

import json
import random

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from openenv.core.generic_client import GenericEnvClient

from wander import load_environment
from wander.serve.server import MAX_BODY_BYTES, create_env_app

from .conftest import SETTINGS

schema = schemathesis.openapi.from_asgi(
    "/openapi.json", create_env_app(load_environment("tictactoe", **SETTINGS))
)


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_route_answers_5xx(case):
    response = case.call()
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} {case.body!r}: {response.text[:300]}"
    )


def _frames(rng: random.Random) -> list[str]:
    """Valid, odd and broken WebSocket messages."""
    junk = [None, True, -1, 2**70, 1.5, "", "x" * 70_000, [], {}, {"a": 1}, "<move>4</move>", "\x00"]
    pick = rng.choice
    frames = [
        json.dumps({"type": pick(["reset", "step", "state", "close?", "", None, 7]), "data": pick(junk)}),
        json.dumps(
            {
                "type": "reset",
                "data": {pick(["seed", "spec", "split", "index", "episode_id", "x"]): pick(junk)},
            }
        ),
        json.dumps(
            {"type": "reset", "data": {"split": pick(["train", "eval", "nope", 3]), "index": pick(junk)}}
        ),
        json.dumps({"type": "step", "data": {"message": pick(junk)}}),
        json.dumps(
            {"type": "step", "data": {"message": f"<move>{rng.randrange(-2, 12)}</move>", "x": pick(junk)}}
        ),
        json.dumps({"type": "step", "data": {"message": f"<move>{rng.randrange(9)}</move>"}}),
        json.dumps({"type": "reset", "data": {"seed": rng.randrange(10**6)}}),
        json.dumps(pick(junk)),
        "{" * rng.randrange(1, 5),
        "".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(rng.randrange(30))),
    ]
    return frames


def test_websocket_fuzz_gets_only_answers_and_error_frames(served):
    from websockets.sync.client import connect

    rng = random.Random(13)
    answered = 0
    for _ in range(20):  # connections
        with connect(served.replace("http", "ws") + "/ws", max_size=None) as ws:
            for _ in range(30):
                ws.send(rng.choice(_frames(rng)))
                reply = json.loads(ws.recv(timeout=10))
                assert reply["type"] in ("observation", "state", "error"), reply
                if reply["type"] == "error":
                    assert reply["data"]["code"] != "EXECUTION_ERROR" or reply["data"]["message"], reply
                answered += 1
    assert answered == 600
    with connect(served.replace("http", "ws") + "/ws") as ws:  # still serving games
        ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"


# ----- the `wander env serve` process under thousands of hostile requests, over raw sockets on loopback -----

FUZZ_REQUESTS = 10_000
FUZZ_FRAMES = 2000
FUZZ_TIME_LIMIT_S = 240.0


def _env_server_targets(env) -> tuple[list, dict]:
    """Every route of the env server, and valid bodies to mutate."""
    name, spec = env.name, env.get_dataset("eval")[0]
    gets = ["/health", "/schema", "/metadata", "/state", "/wander/info", f"/{name}/splits", "/openapi.json"]
    gets += ["/docs", "/list_environments"]
    bodies = {
        "/reset": [
            {},
            {"seed": 3},
            {"split": "eval", "index": 0},
            {"spec": spec},
            {"seed": 1, "episode_id": "e"},
        ],
        "/step": [{"action": {"message": "<move>4</move>"}}, {"action": {"message": "x"}, "timeout_s": 1}],
        f"/{name}/tasks": [{"split": "eval"}],
        f"/{name}/task": [{"split": "eval", "index": 1}],
        f"/{name}/task_range": [{"split": "eval", "start": 0, "stop": 3}],
        f"/{name}/num_tasks": [{"split": "train"}],
        "/mcp": [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}],
    }
    return [("GET", path) for path in gets] + [("POST", path) for path in bodies], bodies


@pytest.mark.slow
def test_the_server_process_takes_thousands_of_hostile_requests_without_a_5xx_and_goes_on_serving():
    from websockets.sync.client import connect

    from ..fuzz_http import Fuzzer, cli_server, idle_connections, memory_mb, server_log

    settings = [f"{k}={v}" for k, v in SETTINGS.items()]
    env = load_environment("tictactoe", **SETTINGS)
    with cli_server(["env", "serve", "tictactoe", *settings], "/health") as (url, server):
        routes, bodies = _env_server_targets(env)
        fuzzer = Fuzzer(int(url.rsplit(":", 1)[1]), routes, bodies, MAX_BODY_BYTES, seed=44)
        held = idle_connections(fuzzer.port, 100)  # slow clients hold connections open all along
        report = fuzzer.run(FUZZ_REQUESTS, server.pid, FUZZ_TIME_LIMIT_S)
        rng, frames = random.Random(44), 0
        for _ in range(FUZZ_FRAMES // 50):
            with connect(url.replace("http", "ws") + "/ws", max_size=None) as ws:
                for _ in range(50):
                    ws.send(rng.choice(_frames(rng)))
                    assert json.loads(ws.recv(timeout=10))["type"] in ("observation", "state", "error")
                    frames += 1
        rss, peak = memory_mb(server.pid)
        print(
            f"env server fuzz: {report.summary()}; {frames} WebSocket frames; RSS after frames {rss:.0f} MiB"
        )
        assert report.requests == FUZZ_REQUESTS, f"only {report.requests} requests in {FUZZ_TIME_LIMIT_S} s"
        assert report.server_errors() == 0 and report.statuses["timeout"] == 0, (
            f"{report.summary()}\n{server_log(server)}"
        )
        assert 413 in report.statuses and 400 in report.statuses and 200 in report.statuses, report.summary()
        assert rss - report.rss_before_mb < 100 and peak - report.rss_before_mb < 200, report.summary()
        # Still serving: a whole game with OpenEnv's own client, and the HTTP routes.
        with GenericEnvClient(base_url=url).sync() as client:
            result, turns = client.reset(seed=4), 0
            while not result.done:
                result = client.step({"message": f"<move>{turns}</move>"})
                turns += 1
        assert httpx.get(url + "/health", timeout=10).json()["status"] == "healthy"
        for sock in held:
            sock.close()
        assert server.poll() is None
