"""A request body limit for every HTTP server wander runs (env server, teacher, UI): one ASGI middleware.

It lives in the core, the lowest layer, because the servers sit in layers that may not import each other
(`wander.policies` may not import `wander.serve`); it needs nothing beyond the standard library, so the core stays
free of web frameworks. Each server chooses the error body it answers with (OpenEnv's `{"detail": ...}`, OpenAI's
`{"error": {...}}`), so a client of each protocol reads a refusal the way it reads that server's other errors.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]
ASGIApp = Callable[[dict, Receive, Send], Awaitable[None]]


def detail_body(limit: int) -> dict[str, Any]:
    """The default refusal: `{"detail": ...}`, as FastAPI words its own errors."""
    return {"detail": f"request body larger than {limit} bytes"}


class BodyLimit:
    """ASGI middleware: refuse an HTTP body over `limit` bytes with 413 before the app reads any of it.

    A declared `Content-Length` over the limit is refused at once; a chunked body is counted as it arrives and
    refused when it passes the limit, so a client can never make the server hold more than `limit` bytes of it.
    `error_body(limit)` builds the JSON of the refusal (default `detail_body`).
    """

    def __init__(self, app: ASGIApp, limit: int, error_body: Callable[[int], dict[str, Any]] = detail_body):
        self.app, self.limit, self.error_body = app, limit, error_body

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        """Buffer the body up to the limit, then hand it to the app; 413 beyond it."""
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await self._too_large(send)
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: let the app see the disconnect
                return await self.app(scope, _replay([message]), send)
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                return await self._too_large(send)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        await self.app(scope, _replay([{"type": "http.request", "body": body, "more_body": False}]), send)

    async def _too_large(self, send: Send) -> None:
        content = json.dumps(self.error_body(self.limit)).encode()
        # `Connection: close`: the unread rest of the body must not be parsed as the next request.
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(content)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": content})


def _replay(messages: list[dict]) -> Receive:
    """A `receive` that hands out `messages`, then a disconnect (the body was read here already)."""
    queue = list(messages)

    async def receive() -> dict:
        return queue.pop(0) if queue else {"type": "http.disconnect"}

    return receive
