"""What an agent sees of a served env: for every environment of the catalogue, no answer of `wander env serve` (HTTP
reset, step, state, the Task API, the WebSocket session, the `--web` routes) holds a field the env declares private
(`Environment.private_spec_keys` / `private_state_keys`), while the server still scores with them."""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from wander import load_environment
from wander.core.environment import Environment
from wander.core.policy import Reply
from wander.core.registry import environment_names, module_name

from ..fuzz_http import cli_server

ENVS = environment_names()  # found by looking, as the registry finds them: a new env folder is covered here
SMALL = {"num_train": 8, "num_eval": 3, "num_test": 3}


def small(name: str) -> dict[str, int]:
    """Small splits, for the envs whose factory takes split sizes (a server builds every split at start)."""
    parameters = inspect.signature(importlib.import_module(module_name(name)).load_environment).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):  # a config class's fields
        return dict(SMALL)
    return {k: v for k, v in SMALL.items() if k in parameters}


def nodes(value: Any) -> Iterator[Any]:
    """Every value of a JSON tree, the tree itself included."""
    yield value
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for child in children:
        yield from nodes(child)


def substantial(value: Any) -> bool:
    """A private value worth looking for by value: a longer string or a container (a number like an answer of 7
    also appears as a tool count or in the problem's text; for those the keys are what is checked)."""
    return (isinstance(value, str) and len(value) >= 12) or (isinstance(value, (dict, list)) and bool(value))


class Secrets:
    """What one env must keep to itself: its private keys, and the private values of the episodes played here."""

    def __init__(self, env: Environment):
        self.keys = set(env.private_spec_keys) | set(env.private_state_keys)
        self.env, self.values = env, []

    def note(self, spec: dict, state: dict) -> None:
        """Remember the private values of an episode's spec and of its state at this point."""
        self.values += [spec[k] for k in self.env.private_spec_keys if k in spec]
        self.values += [
            json.loads(json.dumps(state[k], default=repr)) for k in self.env.private_state_keys if k in state
        ]

    def leaks(self, where: str, answer: Any) -> list[str]:
        """Each private key or value found in an answer of the server."""
        found = []
        strings = [n for n in nodes(answer) if isinstance(n, str)]
        for node in nodes(answer):
            if isinstance(node, dict) and self.keys & set(node):
                found.append(f"{where}: private key(s) {sorted(self.keys & set(node))}")
        for value in filter(substantial, self.values):
            if any(node == value for node in nodes(answer)):
                found.append(f"{where}: a private value {str(value)[:60]!r}")
            elif isinstance(value, str) and any(value in s for s in strings):
                found.append(f"{where}: a private value {value[:60]!r} inside a text")
        return found


def test_every_declared_private_key_is_a_key_of_the_envs_specs_or_state():
    """A declaration that names no real field protects nothing (a typo): each key is in the specs or the state."""
    declared = 0
    for name in ENVS:
        env = load_environment(name, **small(name))
        spec = env.get_dataset("eval")[0]
        state = env.start(spec).state
        assert env.private_spec_keys <= set(spec), (
            f"{name}: {env.private_spec_keys - set(spec)} not in its specs"
        )
        assert env.private_state_keys <= set(state), (
            f"{name}: {env.private_state_keys - set(state)} not in its state"
        )
        assert env.public_spec(spec).keys().isdisjoint(env.private_spec_keys)
        declared += len(env.private_spec_keys) + len(env.private_state_keys)
    assert declared, "no env of the catalogue declares a private field: this suite would check nothing"


@pytest.mark.slow
@pytest.mark.parametrize("name", ENVS)
def test_no_answer_of_the_server_shows_a_private_field_and_the_server_still_scores_with_them(name):
    from websockets.sync.client import connect

    settings = small(name)
    env = load_environment(name, **settings)
    secrets, specs = Secrets(env), env.get_dataset("eval").to_list()
    teacher = env.teacher_policy(0.0, 0)
    answers: list[tuple[str, Any]] = []
    args = ["env", "serve", name, *(f"{k}={v}" for k, v in settings.items()), "--web"]
    with cli_server(args, "/health") as (url, _):

        def post(path: str, body: dict, unwrap: str | None = None) -> None:
            answer = httpx.post(url + path, json=body, timeout=30).json()
            # OpenEnv wraps a task in {"task": ...}: its own key, not workplace_assistant's private `task`.
            answers.append((f"POST {path} {body}", answer[unwrap] if unwrap else answer))

        post("/reset", {})
        post("/reset", {"seed": 5})
        for index in range(len(specs)):
            post("/reset", {"split": "eval", "index": index})
        post("/reset", {"spec": specs[0]})  # the client's own spec: its private fields are not echoed either
        post("/step", {"action": {"message": "hello"}})
        answers.append(("GET /state", httpx.get(url + "/state", timeout=30).json()))
        post(f"/{name}/tasks", {"split": "eval"})
        post(f"/{name}/task", {"split": "eval", "index": 0}, unwrap="task")
        post(f"/{name}/task_range", {"split": "eval", "start": 0, "stop": len(specs)})

        # Whole episodes over the WebSocket session, reset by split and index, played by the env's teacher: the
        # server keeps the answer and scores with it as the local env does.
        with connect(url.replace("http", "ws") + "/ws", max_size=None) as ws:

            def send(message: dict) -> dict:
                ws.send(json.dumps(message))
                answer = json.loads(ws.recv(timeout=30))
                answers.append((f"ws {message}", answer))
                assert answer["type"] != "error", answer
                return answer["data"]

            for index, spec in enumerate(specs):
                local = env.start(spec)
                secrets.note(spec, local.state)
                data = send({"type": "reset", "data": {"split": "eval", "index": index}})
                while not data["done"]:
                    reply = teacher([data["observation"]["prompt"]])[0].content
                    env.advance(local, Reply(reply))
                    secrets.note(spec, local.state)
                    data = send({"type": "step", "data": {"message": reply}})
                    send({"type": "state"})
                env.score([local])
                assert data["reward"] == pytest.approx(local.reward) and local.done

        # OpenEnv's web interface (`--web`): one shared episode.
        post("/web/reset", {})
        post("/web/step", {"action": {"message": "hello"}})
        answers.append(("GET /web/state", httpx.get(url + "/web/state", timeout=30).json()))

    secrets.note(specs[0], {})
    leaks = [leak for where, answer in answers for leak in secrets.leaks(where, answer)]
    assert not leaks, "\n".join(leaks[:10])
    assert len(answers) > 2 * len(specs) + 10  # every route above answered and was checked
