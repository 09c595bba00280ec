"""Sessions per client on an env server: one cap for WebSocket and HTTP MCP sessions together, a share of it per
client, one idle TTL for both kinds, and a refusal that says which limit was reached.

openenv's `HTTPEnvServer` keeps every session in one table, whichever way it was opened (a `/ws` or `/mcp`
WebSocket connection, or `openenv/session/create` over HTTP `/mcp`), capped at `max_concurrent_envs`, and reaps
the idle ones. It does not know who opened a session, so one client could take every slot: 266 unauthenticated
`openenv/session/create` calls held all 256, and WebSocket clients were refused until the idle TTL freed them.
`SharedSessionServer` is openenv's server with:

- **a client** = the peer's IP address (`ClientAddress` names it for each request and connection). Behind a reverse
  proxy every client is the proxy; uvicorn is told not to read `X-Forwarded-For` (`uvicorn_options`), which any
  client could fill with any address;
- **a per-client share**: each client holds at most `per_client` sessions, of both kinds together;
- **one TTL for both kinds**: a session of either kind idle longer than the TTL is closed, by a reaper that wakes
  every `min(ttl / 4, 5 s)` (openenv's wakes every `max(ttl / 4, 5 s)`: 75 s at the default 300 s TTL, so a
  session outlived its TTL by up to 75 s and a short TTL by up to 5 s);
- **a refusal that says why**: OpenEnv's own `SessionCapacityError` (a WebSocket's `CAPACITY_REACHED` error frame,
  a JSON-RPC error over HTTP `/mcp`), its message naming the limit, the numbers, and what to do.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from openenv.core.env_server import http_server
from openenv.core.env_server.exceptions import SessionCapacityError
from openenv.core.env_server.interfaces import Environment as OpenEnvEnvironment

logger = logging.getLogger(__name__)

REAP_EVERY_S = 5.0  # the reaper's longest sleep: an idle session is closed at most this long after its TTL
UNKNOWN_CLIENT = "unknown"  # a connection whose peer the ASGI server did not name (a unix socket)
PEER: contextvars.ContextVar[str] = contextvars.ContextVar("wander_serve_peer", default=UNKNOWN_CLIENT)


@dataclass(frozen=True)
class SessionLimits:
    """What one server process holds: `cap` sessions, at most `per_client` of them per client, each closed after
    `idle_ttl_s` seconds idle (None: never). `server_cap` is the whole server's cap when this process is one of
    several workers (`wander.serve.workers`), for the refusal's words."""

    cap: int
    per_client: int
    idle_ttl_s: float | None
    server_cap: int | None = None

    def full(self, open_now: int) -> str:
        """Why a create was refused with every slot taken."""
        return (
            f"the server is full: {open_now} of {self._sessions()} are open (WebSocket and HTTP MCP sessions count "
            f"together); try again later{self._ttl()}"
        )

    def share_taken(self, client: str, held: int) -> str:
        """Why a create was refused to a client that holds its share."""
        return (
            f"this client ({client}) holds its share of {self._sessions()}: {held} open, "
            f"at most {self.per_client} per client (a client is an IP address; WebSocket and HTTP MCP sessions "
            "count together); close one of its sessions (a WebSocket's close message or disconnect, "
            f"openenv/session/close for an HTTP MCP session){self._ttl(' or wait')}"
        )

    def _sessions(self) -> str:
        if self.server_cap is None or self.server_cap == self.cap:
            return f"the server's {self.cap} sessions"
        return f"this worker process's {self.cap} sessions (its part of the server's {self.server_cap})"

    def _ttl(self, lead: str = ", or wait") -> str:
        if self.idle_ttl_s is None:
            return ""
        return f"{lead}: a session idle for {self.idle_ttl_s:g} s is closed"


class ClientAddress:
    """ASGI middleware: sets `PEER` to the peer's IP address for each HTTP request and WebSocket connection, so the
    server's session table knows who creates a session (openenv's handlers do not pass the request down)."""

    def __init__(self, app: Callable):
        self.app = app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        """Name the peer for what runs inside this request or connection."""
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        client = scope.get("client")
        token = PEER.set(str(client[0]) if client else UNKNOWN_CLIENT)
        try:
            await self.app(scope, receive, send)
        finally:
            PEER.reset(token)


class SharedSessionServer(http_server.HTTPEnvServer):
    """openenv's server with a per-client share of its session cap and an idle reaper that keeps to the TTL."""

    def __init__(self, *args: Any, limits: SessionLimits, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.limits = limits
        self._owners: dict[str, str] = {}  # session id -> the client that created it
        self._creating: Counter[str] = Counter()  # creates admitted, not yet in `_owners`, by client

    async def _create_session(self) -> tuple[str, OpenEnvEnvironment]:
        """openenv's create, admitted first against the cap and the creating client's share."""
        client = PEER.get()
        self._admit(client)  # no await between the check and the count: the event loop runs nothing else
        try:
            session_id, env = await super()._create_session()
        finally:
            self._creating[client] -= 1
            if not self._creating[client]:  # a key per address ever seen would grow without bound
                del self._creating[client]
        self._owners[session_id] = client
        return session_id, env

    def _admit(self, client: str) -> None:
        """Count a create by `client`, or refuse it with the limit it would pass."""
        # openenv also drops sessions without `_destroy_session` (openenv/session/close pops its table directly):
        # the owners kept are those of sessions still in the table.
        self._owners = {sid: owner for sid, owner in self._owners.items() if sid in self._sessions}
        held = Counter(self._owners.values()) + self._creating
        open_now = sum(held.values())
        if open_now >= self.limits.cap:
            raise SessionCapacityError(open_now, self.limits.cap, self.limits.full(open_now))
        if held[client] >= self.limits.per_client:
            raise SessionCapacityError(
                open_now, self.limits.cap, self.limits.share_taken(client, held[client])
            )
        self._creating[client] += 1

    async def _reap_idle_sessions(self) -> None:
        """Close every session idle past the TTL (a WebSocket attached to an HTTP MCP session keeps it)."""
        ttl = self._session_idle_timeout_s
        if ttl is None:
            return
        while True:
            await asyncio.sleep(min(ttl / 4, REAP_EVERY_S))
            try:
                for session_id in [sid for sid in self._session_info if self._idle(sid, ttl)]:
                    if self._idle(session_id, ttl):  # again: a message may have come while one was closing
                        await self._destroy_session(session_id)
            except Exception:  # noqa: BLE001 - one failed close must not stop the reaping of every later one
                logger.exception("closing idle sessions failed (retried at the next wake)")

    def _idle(self, session_id: str, ttl: float) -> bool:
        info = self._session_info.get(session_id)
        if info is None or session_id in self._session_websocket_attachments:
            return False
        return time.time() - info.last_activity_at > ttl


_BUILDING = threading.Lock()


def build_app(build: Callable[..., FastAPI], limits: SessionLimits, *args: Any, **kwargs: Any) -> FastAPI:
    """`build(*args, **kwargs)`, openenv's `create_fastapi_app` or `create_web_interface_app`, its server a
    `SharedSessionServer` under `limits`."""
    built: list[SharedSessionServer] = []

    def server(*server_args: Any, **server_kwargs: Any) -> SharedSessionServer:
        built.append(SharedSessionServer(*server_args, limits=limits, **server_kwargs))
        return built[-1]

    # Both builders construct `http_server.HTTPEnvServer` themselves and take no server class (the web interface's
    # builder calls `create_fastapi_app`), so the module's name points at ours while one runs.
    with _BUILDING:
        original = http_server.HTTPEnvServer
        http_server.HTTPEnvServer = server  # type: ignore[misc,assignment]
        try:
            app = build(*args, **kwargs)
        finally:
            http_server.HTTPEnvServer = original  # type: ignore[misc]
    if len(built) != 1:  # an openenv that builds its server another way would serve without the limits
        raise RuntimeError(f"openenv built {len(built)} session servers for one app, expected 1")
    return app
