"""The OpenAI-compatible server, through the official openai client and raw HTTP, on loopback."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator

import httpx
import openai
import pytest

from wander.core.policy import Conversation, Reply
from wander.policies.openai_policy import OpenAIPolicy
from wander.policies.openai_policy_config import OpenAIPolicyConfig
from wander.policies.openai_server import count_tokens, create_app, serve_in_process, serve_in_thread

MODEL = "scripted-teacher"


class ScriptedPolicy:
    """Echoes the last message reversed, plus a number drawn from random.Random(seed)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        return [Reply(f"{c[-1]['content'][::-1]} #{self.rng.randint(0, 10**9)}") for c in conversations]


class BrokenPolicy:
    def __init__(self, seed: int) -> None:
        pass

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        raise RuntimeError("the model fell over")


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve_in_thread(create_app(ScriptedPolicy, MODEL)) as url:
        yield url


@pytest.fixture(scope="module")
def client(base_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=base_url, api_key="EMPTY", max_retries=0, timeout=10) as c:
        yield c


def ask(client: openai.OpenAI, text: str = "hello world!", **kwargs: object) -> object:
    return client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": text}], **kwargs)


def test_models_list_and_retrieve(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == [MODEL]
    assert client.models.retrieve(MODEL).owned_by == "wander"
    with pytest.raises(openai.NotFoundError) as info:
        client.models.retrieve("gpt-nope")
    assert info.value.body["code"] == "model_not_found"


def test_completion_with_n_choices_and_usage(client: openai.OpenAI) -> None:
    response = ask(client, "hello world!", n=3, seed=7)
    assert response.object == "chat.completion" and response.id.startswith("chatcmpl-")
    assert response.model == MODEL and isinstance(response.created, int)
    assert [c.index for c in response.choices] == [0, 1, 2]
    assert all(c.finish_reason == "stop" and c.message.role == "assistant" for c in response.choices)
    contents = [c.message.content for c in response.choices]
    assert contents == [
        r.content for r in ScriptedPolicy(7)([[{"role": "user", "content": "hello world!"}]] * 3)
    ]
    assert len(set(contents)) == 3  # n samples, not one sample copied
    usage = response.usage
    assert usage.prompt_tokens == 3  # "hello", "world", "!"
    assert usage.completion_tokens == sum(count_tokens(c) for c in contents)
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_answers_are_deterministic_given_the_seed(client: openai.OpenAI) -> None:
    def contents(**kwargs: object) -> list[str]:
        return [c.message.content for c in ask(client, "abc", n=2, **kwargs).choices]

    assert contents(seed=11) == contents(seed=11)
    assert contents(seed=11) != contents(seed=12)
    assert contents() == contents(seed=0)  # no seed means seed 0


def test_accepts_content_parts_and_ignores_unknown_fields(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": "play well"},
            {"role": "user", "content": [{"type": "text", "text": "ab"}, {"type": "text", "text": "cd"}]},
        ],
        temperature=0.7,
        max_tokens=5,
        stop=["\n"],
        seed=1,
    )
    assert response.choices[0].message.content.startswith("dcba #")


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ("{not json", 400, None),
        ("[]", 400, None),
        ("", 400, None),
        ('{"model": "scripted-teacher"}', 400, "messages"),
        ('{"model": "scripted-teacher", "messages": "hi"}', 400, "messages"),
        ('{"model": "scripted-teacher", "messages": []}', 400, "messages"),
        (
            '{"model": "scripted-teacher", "messages": [{"role": "robot", "content": "x"}]}',
            400,
            "messages.0.role",
        ),
        (
            '{"model": "scripted-teacher", "messages": [{"role": "user", "content": 3}]}',
            400,
            "messages.0.content",
        ),
        ('{"model": "scripted-teacher", "messages": [{"role": "user"}]}', 400, "messages.0"),
        ('{"model": "scripted-teacher", "messages": [{"content": "x"}]}', 400, "messages.0.role"),
        ('{"messages": [{"role": "user", "content": "x"}]}', 400, "model"),
        ('{"model": "scripted-teacher", "messages": [{"role": "user", "content": "x"}], "n": 0}', 400, "n"),
        (
            '{"model": "scripted-teacher", "messages": [{"role": "user", "content": "x"}], "n": "many"}',
            400,
            "n",
        ),
        ('{"model": "gpt-nope", "messages": [{"role": "user", "content": "x"}]}', 404, "model"),
        (
            '{"model": "scripted-teacher", "messages": [{"role": "user", "content": "x"}], "stream": true}',
            400,
            "stream",
        ),
    ],
)
def test_malformed_requests_get_openai_errors(
    base_url: str, body: str, status: int, param: str | None
) -> None:
    response = httpx.post(
        f"{base_url}/chat/completions", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["message"]
    assert error["param"] == param


def test_malformed_requests_through_the_openai_client(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=[{"role": "wizard", "content": "x"}])
    assert (
        info.value.body["type"] == "invalid_request_error" and info.value.body["param"] == "messages.0.role"
    )
    with pytest.raises(openai.BadRequestError) as info:
        ask(client, n=0)
    assert info.value.body["param"] == "n"
    with pytest.raises(openai.BadRequestError) as info:
        ask(client, stream=True)
    assert "stream" in info.value.body["message"] and info.value.status_code == 400
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-nope", messages=[{"role": "user", "content": "x"}])
    assert info.value.body["code"] == "model_not_found"


def test_unknown_routes_and_methods_get_openai_errors(base_url: str) -> None:
    for response in (httpx.get(f"{base_url}/nowhere"), httpx.delete(f"{base_url}/models")):
        assert response.status_code in (404, 405)
        assert response.json()["error"]["type"] == "invalid_request_error"


def test_policy_failure_is_a_server_error_with_openai_body() -> None:
    with serve_in_thread(create_app(BrokenPolicy, MODEL)) as url:
        with openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=0) as client:
            with pytest.raises(openai.InternalServerError) as info:
                ask(client)
    assert info.value.body["type"] == "server_error" and "fell over" in info.value.body["message"]


def test_openai_policy_round_trip(base_url: str) -> None:
    policy = OpenAIPolicy(OpenAIPolicyConfig(base_url=base_url, model=MODEL, seed=3, timeout=10))
    convs = [[{"role": "user", "content": f"move {i}"}] for i in range(4)] + [
        [{"role": "user", "content": "move 0"}]
    ]
    replies = policy(convs)
    # The server builds ScriptedPolicy(request seed) per request, so each answer is reproducible locally.
    for conv, body, reply in zip(convs, policy.request_bodies(convs), replies, strict=True):
        assert reply.content == ScriptedPolicy(body["seed"])([conv])[0].content
        assert reply.extra["usage"]["total_tokens"] > 0
    assert replies[0].content != replies[4].content  # a repeated conversation is a fresh sample
    assert policy(convs) == replies


def test_serve_in_thread_stops_on_exit() -> None:
    with serve_in_thread(create_app(ScriptedPolicy, MODEL)) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        assert httpx.get(f"{url}/models").status_code == 200
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/models", timeout=1.0)


class PidPolicy:
    """Answers with the id of the process that runs it."""

    def __init__(self, seed: int) -> None:
        pass

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        return [Reply(str(os.getpid())) for _ in conversations]


def test_serve_in_process_answers_from_another_process_and_stops_on_exit() -> None:
    with serve_in_process(create_app(PidPolicy, MODEL)) as url:
        with openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=0, timeout=10) as client:
            pid = int(ask(client).choices[0].message.content)
        assert pid != os.getpid()
        assert os.path.exists(f"/proc/{pid}")
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/models", timeout=1.0)
    assert not os.path.exists(f"/proc/{pid}")  # stopped and reaped, not left running


def test_count_tokens_rule() -> None:
    assert count_tokens("") == 0
    assert count_tokens("Hello, world!") == 4
    assert count_tokens("<move>4</move>") == 8
