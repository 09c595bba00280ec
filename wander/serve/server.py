"""Serve any wander environment as an OpenEnv server, built on the `openenv` package's own server.

`openenv.core.env_server.create_fastapi_app` gives the protocol: a WebSocket session per connection at `/ws`
(reset / step / state / close messages, error frames with codes), the stateless HTTP `/reset` `/step` `/state`,
`/schema`, `/metadata`, `/health`, the Task API (`/{env}/splits`, `/{env}/tasks`, ...), HTTP MCP sessions, a session
cap that refuses a new session with `CAPACITY_REACHED`, and an idle-session reaper; `wander.serve.sessions` adds a
per-client share of the cap and a reaper that keeps to the TTL. Here each OpenEnv session is an
`EpisodeSession`: one wander `Episode` at a time, played through the environment's own `start` / `advance` /
`score`, so a served episode is the local one (same spec, same replies, same transcript). The wander environment
object is shared by every session; its episode methods keep all per-episode state in the `Episode`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import random
import threading
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment as OpenEnvEnvironment
from openenv.core.env_server.types import ConcurrencyConfig, EnvironmentMetadata

from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.core.policy import Reply
from wander.core.splits import SPLIT_SEEDS
from wander.serve.guards import BodyLimit, FrameCheck, validation_error
from wander.serve.limits import IDLE_TTL_S, MAX_SESSIONS, per_client_limit
from wander.serve.protocol import WanderAction, WanderObservation, WanderState, finite, json_safe
from wander.serve.sessions import ClientAddress, SessionLimits, build_app

MAX_BODY_BYTES = 1 << 20  # an HTTP body or WebSocket frame larger than this is refused (413 / close 1009)
RESET_FIELDS = ("seed", "episode_id", "spec", "split", "index")


class ResetSeeds:
    """The seeds a server draws for a reset that names no episode: a deterministic stream from the server's seed.

    Shared by every session of one server process (HTTP `/reset` builds a fresh session per request), so a fresh
    server with the same seed hands out the same seeds in the same order. Seeds come from the train split's range.
    """

    def __init__(self, seed: int = 0, stream: int = 0):
        # `stream` tells worker processes of one server apart, so they never hand out the same sequence.
        self._rng = random.Random(f"{seed}:{stream}")
        self._lock = threading.Lock()  # threaded sessions reset from openenv's worker threads

    def draw(self) -> int:
        """The next seed."""
        with self._lock:
            return self._rng.randrange(*SPLIT_SEEDS["train"])


class RequestError(ValueError):
    """A request the session cannot serve because of what the client sent; HTTP status in `status`."""

    status = 422


class SessionError(RequestError):
    """A request out of order for this session: a step with no live episode, or after the episode ended."""

    status = 409


class EpisodeSession(OpenEnvEnvironment[WanderAction, WanderObservation, WanderState]):
    """One OpenEnv session: plays one episode of a shared wander environment at a time."""

    # Sessions share only the wander environment, whose episode methods keep per-episode state in the Episode.
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env: Environment, seeds: ResetSeeds | None = None):
        super().__init__()
        self.env = env
        self.seeds = seeds or ResetSeeds()
        self.episode: Episode | None = None
        self.episode_id: str | None = None
        self.closed = False

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> WanderObservation:
        """Start an episode from a seed, an explicit spec, a split and index, or (none of them) a seed it draws.

        The observation's `metadata` names the episode: `seed` (given or drawn; `reset(seed=...)` replays it) and
        `spec`, its public part (`Environment.public_spec`: never an answer or another private field).
        """
        self._check_open()
        unknown = sorted(set(kwargs) - set(RESET_FIELDS))
        if unknown:
            raise RequestError(f"unknown reset field(s) {unknown}; known: {list(RESET_FIELDS)}")
        given, split, index = kwargs.get("spec"), kwargs.get("split"), kwargs.get("index")
        if seed is None and given is None and split is None and index is None:
            seed = self.seeds.draw()
        spec = self._resolve_spec(seed, given, split, index)
        try:
            self.episode = self.env.start(spec)
        except Exception as exc:  # noqa: BLE001 - a spec the env cannot start is the client's input
            shown = self.env.public_spec(spec)  # a spec from a split holds private fields: never echo those
            raise RequestError(
                f"cannot start an episode of {self.env.name} from spec {shown!r}: {exc}"
            ) from exc
        self.episode_id = episode_id
        named = {"seed": seed} if given is None and split is None else {}
        public = json_safe(self.env.public_spec(spec))
        return self._observation(self.episode.messages, metadata={**named, "spec": public})

    def step(self, action: WanderAction, timeout_s: float | None = None, **kwargs: Any) -> WanderObservation:
        """Play the model's message through the env; the final step carries the reward and rubric values."""
        self._check_open()
        ep = self.episode
        if ep is None:
            raise SessionError(
                "no episode in this session: send reset first (HTTP /step is stateless in OpenEnv: each request "
                "gets a fresh environment; play episodes over the WebSocket session at /ws)"
            )
        if ep.done:
            raise SessionError("the episode is over: send reset to start another")
        before = len(ep.messages)
        self.env.advance(ep, Reply(action.message))
        if ep.done:
            self.env.score([ep])
        return self._observation(ep.messages[before + 1 :])

    # Steps run on the server's event loop: a wander step is CPU-bound Python, which threads cannot run in parallel
    # (the GIL), so openenv's per-session thread hop would only add latency. `ThreadedEpisodeSession` keeps it.
    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> WanderObservation:
        """`reset` inline on the event loop."""
        return self.reset(seed=seed, episode_id=episode_id, **kwargs)

    async def step_async(
        self, action: WanderAction, timeout_s: float | None = None, **kwargs: Any
    ) -> WanderObservation:
        """`step` inline on the event loop."""
        return self.step(action, timeout_s=timeout_s, **kwargs)

    @property
    def state(self) -> WanderState:
        """The session's episode: its public spec, model turns so far, whether it is over."""
        ep = self.episode
        return WanderState(
            episode_id=self.episode_id,
            step_count=int(ep.state.get("turn", 0)) if ep else 0,
            spec=json_safe(self.env.public_spec(ep.spec)) if ep else {},
            done=bool(ep and ep.done),
            environment=self.env.name,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        """The environment's name and what the session protocol is."""
        return EnvironmentMetadata(
            name=self.env.name,
            description=f"wander environment {self.env.name!r}: action {{message}}, observation {{messages, prompt}}",
            version="1",
        )

    def close(self) -> None:
        """Called when the server drops the session (closed connection or idle TTL): later messages are refused."""
        self.closed = True
        self.episode = None

    # ----- OpenEnv Task API: the env's splits of episode specs, their public parts (reset by split and index) -----

    def list_splits(self) -> list[str]:
        """The env's splits."""
        return list(self.env.dataset)

    def num_tasks(self, split: str) -> int:
        """Episode specs in a split."""
        return len(self._split(split))

    def get_task(self, split: str, index: int) -> dict:
        """One episode spec's public part (IndexError becomes OpenEnv's 400)."""
        data = self._split(split)
        if not 0 <= index < len(data):
            raise IndexError(index)
        return json_safe(self.env.public_spec(dict(data[index])))

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict]:
        """The public parts of episode specs `[start, stop)` of a split."""
        data = self._split(split)
        indices = range(*slice(start, stop).indices(len(data)))
        return [json_safe(self.env.public_spec(dict(data[i]))) for i in indices]

    def list_tasks(self, split: str) -> list[dict]:
        """Every episode spec of a split."""
        return self.get_task_range(split)

    # ----- helpers -----

    def _check_open(self) -> None:
        if self.closed:
            raise SessionError(
                "this session was closed by the server (idle longer than its TTL); open a new connection"
            )

    def _split(self, split: str) -> Any:
        try:
            return self.env.get_dataset(split)
        except KeyError as exc:
            raise RequestError(str(exc.args[0]) if exc.args else f"no split {split!r}") from None

    def _resolve_spec(self, seed: Any, spec: Any, split: Any, index: Any) -> dict:
        if spec is not None:
            if not isinstance(spec, dict):
                raise RequestError(f"reset 'spec' must be a JSON object, got {type(spec).__name__}")
            return spec
        if split is not None or index is not None:
            if not isinstance(split, str) or not _is_int(index):
                raise RequestError("reset by task needs 'split' (a string) and 'index' (an integer) together")
            data = self._split(split)
            if not 0 <= index < len(data):
                raise RequestError(f"index {index} is out of range for split {split!r}")
            return dict(data[index])  # the whole spec: its private fields stay on this side
        if not _is_int(seed) or seed < 0:
            raise RequestError(f"reset 'seed' must be a non-negative integer, got {seed!r}")
        return self.env.make_spec(seed)

    def _observation(self, messages: list[dict], metadata: dict | None = None) -> WanderObservation:
        ep = self.episode
        assert ep is not None
        done = ep.done
        return WanderObservation(
            done=done,
            reward=finite(ep.reward) if done else None,
            messages=json_safe(messages),
            prompt=[] if done else json_safe(self.env.observation(ep)),
            values={k: finite(v) for k, v in ep.values.items()},
            error=ep.error,
            state=json_safe(self.env.public_state(ep.to_dict()["state"])),
            metadata=metadata or {},
        )


# openenv inspects `reset_async`'s signature on every reset to filter its arguments; a precomputed `__signature__`
# spares it rebuilding that from the code object each time.
EpisodeSession.reset_async.__signature__ = inspect.signature(EpisodeSession.reset_async)  # type: ignore[attr-defined]


class ThreadedEpisodeSession(EpisodeSession):
    """A session whose steps run in openenv's per-session thread: for environments that block on I/O (a remote
    judge, a sandbox), so one slow step does not stall every other session."""

    reset_async = OpenEnvEnvironment.reset_async
    step_async = OpenEnvEnvironment.step_async


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _request_error(_: Request, exc: RequestError) -> JSONResponse:
    return JSONResponse(status_code=exc.status, content={"detail": str(exc)})


def create_env_app(
    env: Environment,
    *,
    max_sessions: int = MAX_SESSIONS,
    max_sessions_per_client: int | None = None,
    idle_ttl_s: float | None = IDLE_TTL_S,
    max_body_bytes: int = MAX_BODY_BYTES,
    threaded: bool = False,
    reported_max_sessions: int | None = None,
    reported_max_sessions_per_client: int | None = None,
    reset_seed: int = 0,
    reset_stream: int = 0,
    web: bool = False,
) -> FastAPI:
    """An OpenEnv app (openenv's own server) serving `env`: one episode session per WebSocket connection.

    At most `max_sessions` sessions, WebSocket and HTTP MCP together, `max_sessions_per_client` of them per client
    (None: `wander.serve.limits.default_per_client`), each closed after `idle_ttl_s` seconds idle (None: never); see
    `wander.serve.sessions`. A reset naming no episode draws its seed from `reset_seed` (see `ResetSeeds`). `web`
    adds OpenEnv's own Gradio web interface at `/web` (one shared episode, for a person trying the env in a browser).

    `reported_max_sessions` and `reported_max_sessions_per_client` are what `/wander/info` reports when this app is
    one of several worker processes (`wander.serve.workers`): the whole server's, not this worker's part.
    """
    per_client = per_client_limit(max_sessions, max_sessions_per_client)
    limits = SessionLimits(max_sessions, per_client, idle_ttl_s, reported_max_sessions)
    # Build lazily made splits now, not concurrently inside the first sessions.
    for split in list(env.dataset):
        env.get_dataset(split)
    seeds = ResetSeeds(reset_seed, reset_stream)
    threaded = threaded or env.steps_block
    session = functools.partial(ThreadedEpisodeSession if threaded else EpisodeSession, env, seeds)
    concurrency = ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=idle_ttl_s)
    if web:
        from openenv.core.env_server.web_interface import create_web_interface_app  # imports gradio: ~seconds

        app = build_app(
            create_web_interface_app,
            limits,
            session,
            WanderAction,
            WanderObservation,
            env.name,
            concurrency_config=concurrency,
            state_cls=WanderState,
            mode="simulation",
        )
    else:
        app = build_app(
            create_fastapi_app,
            limits,
            session,
            WanderAction,
            WanderObservation,
            concurrency_config=concurrency,
            env_name=env.name,
            state_cls=WanderState,
            mode="simulation",
        )
    app.title = f"wander environment {env.name!r} (OpenEnv)"

    config = getattr(env, "config", None)
    settings = json_safe(dataclasses.asdict(config)) if dataclasses.is_dataclass(config) else None

    @app.get("/wander/info", tags=["Environment Info"])
    def wander_info() -> dict[str, Any]:
        """What a wander client needs beyond OpenEnv: rubric names and weights, turn limit, history mode, the env's
        settings (its config dataclass; null without one), so a client can check it plays its own, and capacity."""
        return {
            "name": env.name,
            "rubric": env.rubric.names,
            "weights": list(env.rubric.weights),
            "max_turns": env.max_turns,
            "full_history": env.full_history,
            "settings": settings,
            "max_sessions": reported_max_sessions or max_sessions,
            "max_sessions_per_client": reported_max_sessions_per_client or per_client,
        }

    app.add_exception_handler(RequestError, _request_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    app.add_middleware(FrameCheck)
    app.add_middleware(ClientAddress)
    return app


@contextlib.contextmanager
def serve_env_in_thread(
    env: Environment, host: str = "127.0.0.1", port: int = 0, **app_options: Any
) -> Iterator[str]:
    """Serve `env` over OpenEnv on a background thread; yield its base URL (`http://host:port`); stop on exit."""
    from wander.policies.openai_server import serve_in_thread

    app = create_env_app(env, **app_options)
    with serve_in_thread(
        app, host, port, api_path="", probe_path="/health", **uvicorn_options(app_options)
    ) as url:
        yield url


def serve_env_forever(
    env: Environment, host: str = "127.0.0.1", port: int = 8000, **app_options: Any
) -> None:
    """Serve `env` over OpenEnv in the foreground until interrupted (`wander env serve`)."""
    import uvicorn

    app = create_env_app(env, **app_options)
    uvicorn.run(app, host=host, port=port, log_level="info", **uvicorn_options(app_options))


def uvicorn_options(app_options: dict[str, Any]) -> dict[str, Any]:
    """uvicorn's settings for an env server: frame size limit, no per-message compression, no proxy headers."""
    # A step's frames are a few hundred bytes: compressing each (uvicorn's default when the client offers it, as
    # openenv's does) costs more server CPU than it saves on any network. uvicorn by default takes the client's
    # address from `X-Forwarded-For` on a connection from 127.0.0.1: a local client could then name itself anything
    # and take every client's share of the sessions (the peer's own address is the client, wander.serve.sessions).
    return {
        "ws_max_size": app_options.get("max_body_bytes", MAX_BODY_BYTES),
        "ws_per_message_deflate": False,
        "proxy_headers": False,
    }
