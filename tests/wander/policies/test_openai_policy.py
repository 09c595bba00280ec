"""OpenAIPolicy against real loopback servers that fail the ways real APIs fail."""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from wander.core.policy import Policy, Reply
from wander.policies.openai_policy import OpenAIPolicy, PolicyRequestError, request_seed
from wander.policies.openai_policy_config import OpenAIPolicyConfig

TIMEOUT = 0.5  # seconds per attempt, client side
HANG = 20.0  # a hanging server holds the connection this long, silent, unless the client hangs up first
MODEL = "fault-model"

Fault = int | str | None  # an HTTP status, "hang", "drop", or None to answer


class FaultServer(ThreadingHTTPServer):
    """A Chat Completions endpoint on stdlib http.server whose answers follow a fault schedule."""

    daemon_threads = True  # hanging handlers must not block shutdown
    request_queue_size = 128  # the default backlog of 5 drops SYNs under 10 concurrent clients

    def __init__(self, schedule: Callable[[str, int], Fault], delay: float = 0.0) -> None:
        super().__init__(("127.0.0.1", 0), FaultHandler)
        self.schedule = schedule  # (last user message, attempt number from 1) -> fault
        self.delay = delay
        self.lock = threading.Lock()
        self.attempts: Counter[str] = Counter()
        self.answered: list[dict] = []  # bodies of requests that got a 200
        self.auth: list[str | None] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.hung_up: list[
            str
        ] = []  # per "hang": who closed the silent connection first, "client" or "server"


class FaultHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like real APIs: a dropped pooled connection must be survived

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        server: FaultServer = self.server  # type: ignore[assignment]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        key = body["messages"][-1]["content"]
        with server.lock:
            server.attempts[key] += 1
            attempt = server.attempts[key]
            server.auth.append(self.headers.get("Authorization"))
        fault = server.schedule(key, attempt)
        if fault == "drop":
            self.close_connection = True  # close without a byte of response
            return
        if fault == "hang":
            who = "client" if self._client_hangs_up_within(HANG) else "server"
            with server.lock:
                server.hung_up.append(who)
            self.close_connection = True
            return
        if isinstance(fault, int):
            error = {"error": {"message": f"injected {fault}", "type": "test", "param": None, "code": None}}
            self._send(fault, error, {"Retry-After": "0"} if fault == 429 else {})
            return
        with server.lock:
            server.in_flight += 1
            server.max_in_flight = max(server.max_in_flight, server.in_flight)
        time.sleep(server.delay)
        with server.lock:
            server.in_flight -= 1
            server.answered.append(body)
        content = f"answer to {key} (seed {body['seed']})"
        completion = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8},
        }
        self._send(200, completion)

    def _client_hangs_up_within(self, seconds: float) -> bool:
        """Say nothing; True as soon as the client closes the connection, False if it is still open after
        `seconds` (or sends more)."""
        ready, _, _ = select.select([self.connection], [], [], seconds)
        if not ready:
            return False
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""  # end of stream: the client closed
        except ConnectionError:
            return True

    def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


@contextlib.contextmanager
def fault_server(
    schedule: Callable[[str, int], Fault], delay: float = 0.0
) -> Iterator[tuple[FaultServer, str]]:
    """Run a FaultServer in a thread; yield it and its base URL."""
    server = FaultServer(schedule, delay)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def make_config(base_url: str, **overrides: object) -> OpenAIPolicyConfig:
    kwargs = dict(
        base_url=base_url,
        model=MODEL,
        api_key_env="WANDER_TEST_OPENAI_KEY",
        max_retries=4,
        backoff_base=0.01,
        backoff_max=0.05,
        timeout=TIMEOUT,
        max_concurrency=10,
    )
    kwargs.update(overrides)
    return OpenAIPolicyConfig(**kwargs)


def conversations(n: int, prefix: str = "q") -> list[list[dict]]:
    return [
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": f"{prefix}{i}"}]
        for i in range(n)
    ]


def test_is_a_policy() -> None:
    policy = OpenAIPolicy(make_config("http://127.0.0.1:1/v1"))
    assert isinstance(policy, Policy)
    assert policy([]) == [] and policy.stats.attempts == 0


def test_survives_every_fault_and_loses_no_request() -> None:
    faults: list[Fault] = [429, 500, "hang", "drop", 503, 502]
    k = 4

    def schedule(key: str, attempt: int) -> Fault:
        i = int(key[1:])
        # Each conversation meets k different faults, in an order that differs between conversations.
        return faults[(i + attempt) % len(faults)] if attempt <= k else None

    with fault_server(schedule) as (server, url):
        policy = OpenAIPolicy(make_config(url, max_retries=k))
        convs = conversations(20)
        replies = policy(convs)

    assert [r.content.split(" (")[0] for r in replies] == [f"answer to q{i}" for i in range(20)]
    assert all(isinstance(r, Reply) and r.extra["finish_reason"] == "stop" for r in replies)
    assert all(server.attempts[f"q{i}"] == k + 1 for i in range(20))
    assert len(server.answered) == 20
    assert policy.stats.requests == 20
    assert policy.stats.attempts == 20 * (k + 1)
    assert policy.stats.retries == 20 * k
    assert policy.stats.cache_hits == 0


def test_concurrency_is_bounded() -> None:
    with fault_server(lambda key, attempt: None, delay=0.1) as (server, url):
        policy = OpenAIPolicy(make_config(url, max_concurrency=3))
        replies = policy(conversations(12))
    assert len(replies) == 12
    assert 2 <= server.max_in_flight <= 3


def test_always_failing_server_names_endpoint_status_and_attempts() -> None:
    with fault_server(lambda key, attempt: 500) as (server, url):
        policy = OpenAIPolicy(make_config(url, max_retries=2))
        with pytest.raises(PolicyRequestError) as info:
            policy(conversations(1))
    error = info.value
    assert (error.status, error.attempts, error.model) == (500, 3, MODEL)
    assert error.url == f"{url}/chat/completions"
    message = str(error)
    assert f"{url}/chat/completions" in message and "HTTP 500" in message
    assert MODEL in message and "3 attempts" in message
    assert server.attempts["q0"] == 3


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_are_not_retried(status: int) -> None:
    with fault_server(lambda key, attempt: status) as (server, url):
        policy = OpenAIPolicy(make_config(url))
        with pytest.raises(PolicyRequestError) as info:
            policy(conversations(1))
    assert info.value.status == status and info.value.attempts == 1
    assert f"HTTP {status}" in str(info.value) and "1 attempt:" in str(info.value)
    assert server.attempts["q0"] == 1 and policy.stats.attempts == 1


def test_endless_hang_gives_up_after_timeouts() -> None:
    with fault_server(lambda key, attempt: "hang") as (server, url):
        policy = OpenAIPolicy(make_config(url, max_retries=1))
        with pytest.raises(PolicyRequestError) as info:
            policy(conversations(1))
    # The client gave up on each silent attempt by itself (its timeout), not because the server closed first.
    assert server.hung_up == ["client", "client"] and server.attempts["q0"] == 2
    assert info.value.status is None and info.value.attempts == 2
    assert "connection error" in str(info.value) and "timed out" in str(info.value).lower()


def test_connection_refused_names_the_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again below: nobody listens there
    url = f"http://127.0.0.1:{port}/v1"
    policy = OpenAIPolicy(make_config(url, max_retries=2))
    with pytest.raises(PolicyRequestError) as info:
        policy(conversations(1))
    assert info.value.attempts == 3 and info.value.status is None
    assert url in str(info.value) and "connection error" in str(info.value)


def test_cache_hit_makes_no_request(tmp_path: Path) -> None:
    cache_dir = str(tmp_path / "cache")
    with fault_server(lambda key, attempt: None) as (server, url):
        first = OpenAIPolicy(make_config(url, cache_dir=cache_dir))
        replies = first(conversations(5))
        assert first.stats.requests == 5 and len(server.answered) == 5

        again = OpenAIPolicy(make_config(url, cache_dir=cache_dir))
        assert again(conversations(5)) == replies
        assert again.stats.requests == 0 and again.stats.attempts == 0 and again.stats.cache_hits == 5
        assert len(server.answered) == 5

        # Any sampling parameter is part of the key.
        hotter = OpenAIPolicy(make_config(url, cache_dir=cache_dir, temperature=0.3))
        hotter(conversations(5))
        assert hotter.stats.requests == 5 and hotter.stats.cache_hits == 0

        # A damaged entry costs a request, not the run.
        first.cache_path(first.cache_key(first.request_bodies(conversations(5))[2])).write_text("{not json")
        third = OpenAIPolicy(make_config(url, cache_dir=cache_dir))
        assert third(conversations(5)) == replies
        assert third.stats.requests == 1 and third.stats.cache_hits == 4

    files = list((tmp_path / "cache").rglob("*"))
    assert not [f for f in files if f.name.startswith(".tmp-")]  # atomic writes leave no temp files
    assert len([f for f in files if f.suffix == ".json"]) == 10


def test_seeds_are_deterministic_and_distinct_for_repeats() -> None:
    convs = conversations(3) + conversations(1)  # q0 appears twice
    with fault_server(lambda key, attempt: None) as (server, url):
        a = OpenAIPolicy(make_config(url, seed=7))(convs)
        b = OpenAIPolicy(make_config(url, seed=7))(convs)
        c = OpenAIPolicy(make_config(url, seed=8))(convs)
    seeds_a = [r.extra["seed"] for r in a]
    assert seeds_a == [r.extra["seed"] for r in b]
    assert a == b
    assert seeds_a != [r.extra["seed"] for r in c]
    assert len(set(seeds_a)) == 4  # the repeated conversation gets a fresh sample
    assert seeds_a[0] == request_seed(7, convs[0], 0) and seeds_a[3] == request_seed(7, convs[0], 1)
    assert sorted(body["seed"] for body in server.answered[:4]) == sorted(seeds_a)


def test_api_key_comes_from_the_named_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    with fault_server(lambda key, attempt: None) as (server, url):
        monkeypatch.delenv("WANDER_TEST_OPENAI_KEY", raising=False)
        OpenAIPolicy(make_config(url))(conversations(1))
        monkeypatch.setenv("WANDER_TEST_OPENAI_KEY", "sk-test-secret")
        config = make_config(url)
        policy = OpenAIPolicy(config)
        policy(conversations(1))
    assert server.auth == ["Bearer EMPTY", "Bearer sk-test-secret"]
    assert "sk-test-secret" not in repr(config) + repr(policy) + str(vars(config))


def test_sync_call_works_in_a_thread_and_inside_a_running_loop() -> None:
    with fault_server(lambda key, attempt: None) as (_, url):
        policy = OpenAIPolicy(make_config(url))
        results: list[list[Reply]] = []
        thread = threading.Thread(target=lambda: results.append(policy(conversations(3))))
        thread.start()
        thread.join()

        async def inside_loop() -> list[Reply]:
            return policy(conversations(3))

        assert asyncio.run(inside_loop()) == results[0]
        assert asyncio.run(policy.agenerate(conversations(3))) == results[0]
    assert [r.content.split(" (")[0] for r in results[0]] == ["answer to q0", "answer to q1", "answer to q2"]


def test_request_bodies_carry_the_sampling_params() -> None:
    policy = OpenAIPolicy(make_config("http://127.0.0.1:1/v1", temperature=0.2, top_p=0.9, max_tokens=17))
    (body,) = policy.request_bodies(conversations(1))
    assert body["model"] == MODEL and body["messages"] == conversations(1)[0]
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.2, 0.9, 17)
    assert (
        "max_tokens"
        not in OpenAIPolicy(make_config("http://x/v1", max_tokens=None)).request_bodies(conversations(1))[0]
    )


@pytest.mark.parametrize(
    "bad", [{"max_concurrency": 0}, {"max_retries": -1}, {"timeout": 0}, {"base_url": "localhost:8000"}]
)
def test_config_rejects_nonsense(bad: dict) -> None:
    with pytest.raises(ValueError):
        make_config(bad.pop("base_url", "http://127.0.0.1:1/v1"), **bad)
