"""`wander teacher serve` as a process of its own, on loopback: request bodies are bounded, and thousands of hostile
requests (tests/wander/fuzz_http.py) get no 5xx, leave its memory bounded and a normal client served after them."""

from __future__ import annotations

import httpx
import pytest

from wander import load_environment
from wander.policies.openai_policy import OpenAIPolicy
from wander.policies.openai_policy_config import OpenAIPolicyConfig
from wander.policies.openai_server import MAX_BODY_BYTES

from ..fuzz_http import Fuzzer, cli_server, idle_connections, memory_mb, server_log

FUZZ_REQUESTS = 10_000
FUZZ_TIME_LIMIT_S = 300.0


@pytest.fixture(scope="module")
def env():
    return load_environment("tictactoe")


@pytest.fixture(scope="module")
def teacher(env):
    """The tic-tac-toe teacher served by the CLI: its base URL and process."""
    with cli_server(["teacher", "serve", "--env", "tictactoe"], "/v1/models") as served:
        yield served


def chat(env, **extra: object) -> dict:
    """A valid request: the teacher's model and an opening position."""
    messages = env.start(env.get_dataset("eval")[0]).messages
    return {"model": env.teacher_model, "messages": messages, **extra}


def test_a_body_over_the_limit_is_413_in_openai_shape_and_one_under_it_is_read(env, teacher):
    url, _ = teacher
    padded = chat(env, padding="x" * (MAX_BODY_BYTES + 1))
    refused = httpx.post(url + "/v1/chat/completions", json=padded, timeout=30)
    assert refused.status_code == 413
    assert refused.json()["error"]["code"] == "body_too_large" and str(MAX_BODY_BYTES) in refused.text
    # Chunked, with no length declared: counted as it arrives, refused all the same.
    chunks = (b"x" * 65536 for _ in range(2 * MAX_BODY_BYTES // 65536))
    streamed = httpx.post(url + "/v1/chat/completions", content=chunks, timeout=30)
    assert streamed.status_code == 413
    fits = chat(
        env, padding="x" * (MAX_BODY_BYTES - 10_000)
    )  # unknown fields are ignored: this one is answered
    assert httpx.post(url + "/v1/chat/completions", json=fits, timeout=30).status_code == 200


@pytest.mark.slow
def test_thousands_of_hostile_requests_get_no_5xx_and_a_normal_client_is_served_after(env, teacher):
    url, server = teacher
    valid = [chat(env), chat(env, n=3, seed=7), chat(env, temperature=0.5, max_tokens=16)]
    routes = [
        ("GET", "/v1/models"),
        ("GET", f"/v1/models/{env.teacher_model}"),
        ("POST", "/v1/chat/completions"),
    ]
    fuzzer = Fuzzer(
        int(url.rsplit(":", 1)[1]), routes, {"/v1/chat/completions": valid}, MAX_BODY_BYTES, seed=44
    )
    held = idle_connections(fuzzer.port, 100)  # slow clients hold connections open all along
    report = fuzzer.run(FUZZ_REQUESTS, server.pid, FUZZ_TIME_LIMIT_S)
    rss, peak = memory_mb(server.pid)
    print(f"teacher server fuzz: {report.summary()}")
    assert report.requests == FUZZ_REQUESTS, f"only {report.requests} requests in {FUZZ_TIME_LIMIT_S} s"
    assert report.server_errors() == 0 and report.statuses["timeout"] == 0, (
        f"{report.summary()}\n{server_log(server)}"
    )
    # The fuzz reached every kind of answer: played (200), malformed (400), refused for size (413), unplayable (422).
    assert all(report.statuses[status] for status in (200, 400, 404, 413, 422)), report.summary()
    assert rss - report.rss_before_mb < 100 and peak - report.rss_before_mb < 200, report.summary()
    policy = OpenAIPolicy(OpenAIPolicyConfig(base_url=url + "/v1", model=env.teacher_model, max_retries=0))
    assert env.evaluate(policy, n=4).trajectories[0].reward is not None  # whole games, after all that
    for sock in held:
        sock.close()
    assert server.poll() is None
