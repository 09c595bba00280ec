"""Fuzzing the served environment: schemathesis over its OpenAPI routes, a seeded fuzz over WebSocket frames.

Neither may get a 5xx or take the server down; every answer to bad input is a 4xx or an OpenEnv error frame.
"""

from __future__ import annotations

import json
import random

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from wander import load_environment
from wander.serve.server import create_env_app

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
