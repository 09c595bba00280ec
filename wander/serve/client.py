"""Any OpenEnv server as a wander environment: episodes play on the server, policies and trainers stay here.

`load_environment("openenv:http://host:port")` returns a `RemoteEnvironment`. Its `start` / `advance` / `score`
(the episode protocol every consumer runs: `env.evaluate`, `env(policy)`, `env >> trainer_spec(GRPOTrainer, ...)`)
open an OpenEnv session with the `openenv` package's own client (`GenericEnvClient`, one WebSocket per episode),
send reset and one step per model turn, and build the same `Episode` a local environment would.

Against a wander server (`wander env serve`) the episode is exactly the local one: the server sends the messages it
appended, what the policy reads next, the rubric's reward and every rubric value. Against any other OpenEnv server,
an observation becomes a user message (its `observation_field`, or its only text field, or its JSON), a reply
becomes the action's `action_field` (the action schema's only string field unless named), and the episode reward
is the sum of the step rewards, for at most `max_turns` turns.

An episode copied with `Episode.fork` or `copy.deepcopy` (GRPO's one-decision-per-sample rollout branches episodes
that way) gets its own session lazily, on its next step, by replaying the same spec and replies: exact for servers
whose episodes are a function of (spec, replies), as wander's are.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
import weakref
from collections.abc import Coroutine
from typing import Any

import httpx
from openenv.core.generic_client import GenericEnvClient

from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.core.logs import redact_url
from wander.core.policy import Message, Reply
from wander.core.rubric import Rubric

PREFIX = "openenv:"
SPLIT_OFFSETS = {"train": 0, "eval": 10_000_000, "test": 20_000_000}  # seeds of servers without a Task API


class RemoteError(RuntimeError):
    """The server refused or failed a request (its message is kept)."""


class _Loop:
    """A private event loop in a daemon thread: every session's WebSocket lives on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True, name="openenv-client").start()

    def run(self, coro: Coroutine, timeout: float | None = None) -> Any:
        """Run a coroutine on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def spawn(self, coro: Coroutine) -> None:
        """Schedule a coroutine without waiting (best-effort cleanup)."""
        if not self.loop.is_closed():
            asyncio.run_coroutine_threadsafe(coro, self.loop)


async def _close_quietly(client: GenericEnvClient) -> None:
    try:
        await client.close()
    except Exception:  # noqa: BLE001 - a session that is already gone needs no closing
        pass


def _close_later(loop: _Loop, client: GenericEnvClient) -> None:
    loop.spawn(_close_quietly(client))


class RemoteSession:
    """One episode's OpenEnv session: its client, and the reset and actions that rebuild it elsewhere."""

    def __init__(self, env: RemoteEnvironment, reset: dict[str, Any], actions: list[dict] | None = None):
        self.env, self.reset_args, self.actions = env, reset, list(actions or [])
        self.client: GenericEnvClient | None = None
        self._finalizer: weakref.finalize | None = None

    def open(self) -> dict[str, Any]:
        """Connect, reset and replay the recorded actions; return the last payload."""
        client = GenericEnvClient(base_url=self.env.url, message_timeout_s=self.env.timeout_s)
        self.client = client
        # The server frees a session's slot when its socket closes: close it when this object goes away.
        self._finalizer = weakref.finalize(self, _close_later, self.env.loop, client)
        payload = self._call(lambda: client.reset(**self.reset_args))
        for action in self.actions:
            payload = self._call(lambda a=action: client.step(a))
        return payload

    def step(self, action: dict[str, Any]) -> dict[str, Any]:
        """Send one action (opening the session first when this is a lazy copy)."""
        if self.client is None:
            self.open()
        assert self.client is not None
        payload = self._call(lambda: self.client.step(action))
        self.actions.append(action)
        return payload

    def close(self) -> None:
        """Close the WebSocket now (the server frees the session)."""
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self.client is not None:
            self.env.loop.run(_close_quietly(self.client), self.env.timeout_s)
            self.client = None

    def _call(self, make: Any) -> dict[str, Any]:
        async def call() -> Any:
            return await make()

        try:
            result = self.env.loop.run(call(), self.env.timeout_s + 5)
        except Exception as exc:  # noqa: BLE001 - the server's error frame or a dropped connection
            raise RemoteError(f"{self.env.shown_url}: {redact_url(str(exc))}") from exc
        return {"observation": result.observation, "reward": result.reward, "done": result.done}

    def __deepcopy__(self, memo: dict) -> RemoteSession:
        # A lazy fork: the copy opens its own session only if it is stepped, by replaying the same episode.
        return RemoteSession(
            self.env, copy.deepcopy(self.reset_args, memo), copy.deepcopy(self.actions, memo)
        )


class RemoteEnvironment(Environment):
    """An OpenEnv server (wander's or anyone's) as a wander environment; episodes are played on the server."""

    def __init__(
        self,
        url: str,
        *,
        action_field: str | None = None,
        observation_field: str | None = None,
        system_prompt: str = "",
        max_turns: int | None = None,
        metrics: list[str] | None = None,
        split_sizes: dict[str, int] | None = None,
        timeout_s: float = 60.0,
    ):
        self.url = url.removeprefix(PREFIX).rstrip("/")
        self.shown_url = redact_url(self.url)  # what errors say: credentials in the URL never reach a log
        self.timeout_s = timeout_s
        self.loop = _Loop()
        info = self._get("/wander/info")  # only wander servers answer it
        self.wander = info is not None
        self.info: dict[str, Any] = info or {}
        names = metrics if metrics is not None else (info or {}).get("rubric", [])
        rubric = Rubric()
        for name in names:
            rubric.add(_server_value(name), 0.0, name=name)
        server_name = (info or {}).get("name") or self._env_name()
        super().__init__(
            rubric=rubric,
            system_prompt=system_prompt,
            max_turns=max_turns or (info or {}).get("max_turns") or 8,
            name=f"{PREFIX}{server_name}",
        )
        self.server_name = server_name
        self.full_history = bool((info or {}).get("full_history", True))
        self.action_field = action_field or ("message" if self.wander else self._action_field())
        self.observation_field = observation_field
        self.split_sizes = split_sizes or {"train": 1000, "eval": 100, "test": 100}
        self._splits: dict[str, Any] = {}
        # A wander server's Task API lists only the public part of each spec (the answer stays there), so an episode
        # of a listed spec is reset by its split and index: spec (as JSON) -> (split, index).
        self._task_refs: dict[str, tuple[str, int]] = {}

    # ----- data: the server's Task API, or seeded specs -----

    def get_dataset(self, split: str = "train") -> Any:
        """The server's episode specs of a split (OpenEnv Task API; a wander server's public parts), else
        `{"seed": n}` rows."""
        if split not in self._splits:
            from datasets import Dataset

            tasks = self._post(f"/{self.server_name}/tasks", {"split": split})
            listed = tasks is not None and self.wander
            if tasks is None:
                if split not in SPLIT_OFFSETS:
                    raise KeyError(f"{self.name} has no split {split!r}; available: {sorted(SPLIT_OFFSETS)}")
                offset = SPLIT_OFFSETS[split]
                tasks = {"tasks": [{"seed": offset + i} for i in range(self.split_sizes.get(split, 0))]}
            data = self._splits[split] = Dataset.from_list(tasks["tasks"])
            if listed:
                # Keys of the rows as the Dataset hands them out (it may fill missing columns), so a row looks up.
                self._task_refs.update((_spec_key(row), (split, i)) for i, row in enumerate(data))
        return self._splits[split]

    @property
    def dataset(self) -> dict:
        """Every split the server lists (train, eval, test without a Task API)."""
        listed = self._get(f"/{self.server_name}/splits")
        names = [s["name"] for s in listed] if listed else list(SPLIT_OFFSETS)
        return {name: self.get_dataset(name) for name in names}

    @dataset.setter
    def dataset(self, value: object) -> None:
        pass  # the server owns the specs

    def make_spec(self, seed: int) -> dict:
        """A spec the server expands from its seed."""
        return {"seed": seed}

    # ----- episodes -----

    def start(self, spec: dict) -> Episode:
        """Open a session, reset it to the spec and return the episode at its first model turn."""
        session = RemoteSession(self, self._reset_args(spec))
        payload = session.open()
        obs = payload["observation"]
        messages = self._messages(obs, opening=True)
        state = {"turn": 0, "done": False, "session": session, "remote_reward": 0.0}
        episode = Episode(spec=dict(spec), messages=messages, state=state, prompt_len=len(messages))
        self._absorb(episode, payload)
        return episode

    def advance(self, episode: Episode, reply: Reply) -> None:
        """Send the model's turn to the server and append its answer."""
        episode.messages.append(reply.message())
        episode.replies.append(reply)
        episode.state["turn"] += 1
        try:
            payload = episode.state["session"].step({self.action_field: reply.content})
        except RemoteError as exc:
            self._step_failed(episode, exc)
            return
        episode.messages.extend(self._messages(payload["observation"], opening=False))
        self._absorb(episode, payload)
        if not self.wander and episode.state["turn"] >= self.max_turns:
            episode.done = True  # the server's own turn limit governs wander servers

    def _step_failed(self, episode: Episode, exc: RemoteError) -> None:
        """A step the server refused or never answered: the episode ends errored (no reward)."""
        episode.error = f"remote step: {exc}"
        episode.done = episode.state["done"] = True

    def observation(self, episode: Episode) -> list[Message]:
        """What the server says the policy reads next (wander), else the whole conversation."""
        prompt = episode.state.get("prompt")
        return prompt if prompt else episode.messages

    def score(self, episodes: list[Episode]) -> None:
        """The server's reward and rubric values; closes the episodes' sessions."""
        for ep in episodes:
            ep.reward = 0.0 if ep.error else float(ep.state.get("remote_reward", 0.0))
            ep.values = dict(ep.state.get("remote_values") or {})
            session = ep.state.get("session")
            if session is not None:
                session.close()

    def corpus(self) -> Any:
        """Opening messages of the first eval episodes (the server's texts are not enumerable from here)."""
        for spec in self.get_dataset("eval").select(range(min(8, len(self.get_dataset("eval"))))):
            episode = self.start(dict(spec))
            self.score([episode])
            yield from (m["content"] for m in episode.messages)

    # ----- wire format -----

    def _reset_args(self, spec: dict) -> dict[str, Any]:
        if self.wander:
            listed = self._task_refs.get(_spec_key(spec))
            if listed is not None:
                return {"split": listed[0], "index": listed[1]}
            return {"seed": spec["seed"]} if set(spec) == {"seed"} else {"spec": spec}
        return dict(spec)  # OpenEnv passes reset only the keyword arguments its reset() declares

    def _messages(self, obs: dict[str, Any], opening: bool) -> list[Message]:
        if self.wander:
            return list(obs.get("messages") or [])
        field = self.observation_field
        if field is None:
            texts = [k for k, v in obs.items() if isinstance(v, str) and k != "metadata"]
            field = texts[0] if len(texts) == 1 else None
        content = (
            str(obs.get(field, ""))
            if field
            else json.dumps({k: v for k, v in obs.items() if k != "metadata"})
        )
        system = [{"role": "system", "content": self.system_prompt}] if opening and self.system_prompt else []
        return system + [{"role": "user", "content": content}]

    def _absorb(self, episode: Episode, payload: dict[str, Any]) -> None:
        obs = payload["observation"]
        if payload.get("reward") is not None:
            episode.state["remote_reward"] += float(payload["reward"])
        if self.wander:
            episode.state["prompt"] = obs.get("prompt") or []
            episode.state["remote_values"] = obs.get("values") or {}
            episode.error = episode.error or obs.get("error")
            # The client keeps its own turn count and done flag (they drive the rollout loop); the rest is the server's.
            episode.state.update(
                {k: v for k, v in (obs.get("state") or {}).items() if k not in ("turn", "done")}
            )
        if payload.get("done"):
            episode.done = episode.state["done"] = True

    def _action_field(self) -> str:
        schema = self._get("/schema") or {}
        action = schema.get("action", {})
        fields = [k for k, v in action.get("properties", {}).items() if v.get("type") == "string"]
        if len(fields) != 1:
            raise ValueError(
                f"{self.shown_url}: cannot tell which action field holds the model's reply (string fields: {fields}); "
                "pass action_field="
            )
        return fields[0]

    def _env_name(self) -> str:
        names = self._get("/list_environments")
        return names[0] if names else "remote"

    def _get(self, path: str) -> Any:
        return self._http("GET", path)

    def _post(self, path: str, body: dict) -> Any:
        return self._http("POST", path, body)

    def _http(self, method: str, path: str, body: dict | None = None) -> Any:
        """JSON of a 2xx answer, None for 404/501 (a server without that route); other failures raise."""
        try:
            response = httpx.request(method, self.url + path, json=body, timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            raise RemoteError(f"no OpenEnv server at {self.shown_url}: {redact_url(str(exc))}") from exc
        if response.status_code in (404, 405, 501):
            return None
        if response.status_code >= 400:
            raise RemoteError(
                f"{method} {self.shown_url}{path}: {response.status_code} {response.text[:300]}"
            )
        return response.json()


def _spec_key(spec: dict) -> str:
    """A spec as a lookup key: its JSON with sorted keys."""
    return json.dumps(spec, sort_keys=True, default=repr)


def _server_value(name: str) -> Any:
    def value(state: dict) -> float:
        return float((state.get("remote_values") or {}).get(name, 0.0))

    value.__name__ = name
    return value
