"""The teacher server answers every request it cannot play with a 4xx naming the problem: fuzzed, 0 5xx."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from envs.tictactoe.board import STATES
from envs.tictactoe.render import SYSTEM_PROMPTS, render_board
from wander import load_environment
from wander.policies.openai_policy import OpenAIPolicy, PolicyRequestError
from wander.policies.openai_policy_config import OpenAIPolicyConfig
from wander.policies.openai_server import serve_in_thread, teacher_app

FUZZ_CASES = 1200


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve_in_thread(teacher_app(load_environment("tictactoe"))) as base_url:
        yield base_url


def user(board: str, rendering: str = "compact") -> dict:
    return {"role": "user", "content": f"You X.\n{render_board(board, rendering)}"}


UNPLAYABLE = {
    "no board": ([{"role": "user", "content": "Let's play tic-tac-toe!"}], "shows no tic-tac-toe board"),
    "last message not from the user": (
        [user("...." + "X" + "...."), {"role": "assistant", "content": "<move>0</move>"}],
        "the last message is from 'assistant'",
    ),
    "finished board": ([user("XXXOO....")], "is over (X won)"),
    "full board": ([user("XOXXOOOXX")], "is over (a draw)"),
    "impossible board": ([user("XXXXXXXXX")], "cannot arise in a game"),
    "too many O": ([user("OO.......")], "cannot arise in a game"),
}


@pytest.mark.parametrize("case", sorted(UNPLAYABLE))
def test_unplayable_requests_are_422_naming_the_problem(url: str, case: str) -> None:
    messages, problem = UNPLAYABLE[case]
    response = httpx.post(
        f"{url}/chat/completions", json={"model": "tictactoe-teacher", "messages": messages}
    )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert problem in error["message"] and error["code"] == "unplayable" and error["param"] == "messages"


def test_the_openai_client_does_not_retry_a_4xx(url: str) -> None:
    policy = OpenAIPolicy(
        OpenAIPolicyConfig(base_url=url, model="tictactoe-teacher", max_retries=5, backoff_base=0)
    )
    with pytest.raises(PolicyRequestError, match="HTTP 422") as info:
        policy([UNPLAYABLE["no board"][0]])
    assert info.value.attempts == 1 and policy.stats.attempts == 1 and policy.stats.retries == 0


def test_openapi_documents_the_errors_and_405_carries_allow(url: str) -> None:
    schema = httpx.get(url.removesuffix("/v1") + "/openapi.json").json()
    responses = schema["paths"]["/v1/chat/completions"]["post"]["responses"]
    assert {"200", "400", "404", "422", "500"} <= set(responses)
    assert "board" in responses["422"]["description"]
    assert responses["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorResponse")
    response = httpx.get(f"{url}/chat/completions")
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    assert response.json()["error"]["code"] == "method_not_allowed"


def random_request(rng: random.Random) -> tuple[dict | str, str]:
    """A request and its kind: playable, well-formed but unplayable, or malformed."""
    board = rng.choice(STATES)
    rendering = rng.choice(["grid", "compact", "board"])
    system = {"role": "system", "content": SYSTEM_PROMPTS[rng.choice(["grid", "compact"]), "think"]}
    messages = [system] if rng.random() < 0.5 else []
    kind = rng.choice(["board", "board", "no board", "not user", "odd board", "malformed", "raw"])
    if kind == "board":
        messages.append(user(board, rendering))
    elif kind == "no board":
        messages.append(
            {"role": "user", "content": rng.choice(["", "hi", "X.O/...", "<move>4</move>", "\x00"])}
        )
    elif kind == "not user":
        messages += [
            user(board, rendering),
            {"role": rng.choice(["assistant", "system", "tool"]), "content": "x"},
        ]
    elif kind == "odd board":
        messages.append(user("".join(rng.choice("XO.") for _ in range(9)), rendering))
    body: dict | str = {"model": "tictactoe-teacher", "messages": messages, "n": rng.randint(1, 3)}
    if rng.random() < 0.3:
        body["seed"] = rng.choice([0, -1, 2**63, 10**40, rng.randint(0, 10**9)])
    if kind == "malformed":
        body = rng.choice(
            [
                {"model": "tictactoe-teacher", "messages": []},
                {"model": "tictactoe-teacher", "messages": [{"role": "user"}]},
                {"model": "tictactoe-teacher", "messages": [{"role": "user", "content": 5}]},
                {"model": "tictactoe-teacher", "messages": "hello"},
                {"model": "tictactoe-teacher", "messages": [user(board)], "n": 0},
                {"model": "tictactoe-teacher", "messages": [user(board)], "seed": "x"},
                {"messages": [user(board)]},
                {"model": "gpt-nope", "messages": [user(board)]},
            ]
        )
    if kind == "raw":
        body = rng.choice(["", "{", "null", "[]", '{"model": 1}', "\xff"])
    return body, kind


def test_fuzzed_requests_never_get_a_5xx(url: str) -> None:
    rng = random.Random(12)
    statuses: Counter = Counter()
    with httpx.Client(base_url=url, timeout=10) as client:
        for _ in range(FUZZ_CASES):
            body, kind = random_request(rng)
            if isinstance(body, str):
                response = client.post("/chat/completions", content=body.encode("utf-8", "surrogatepass"))
            else:
                response = client.post("/chat/completions", json=body)
            statuses[kind, response.status_code] += 1
            assert response.status_code < 500, (body, response.text)
            assert "error" in response.json() or response.status_code == 200
            if kind in ("no board", "not user"):
                assert response.status_code == 422, (body, response.text)
    played = sum(n for (kind, status), n in statuses.items() if status == 200)
    unplayable = sum(n for (kind, status), n in statuses.items() if status == 422)
    assert played > 200 and unplayable > 300, statuses
