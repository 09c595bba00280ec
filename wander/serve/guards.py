"""ASGI guards in front of openenv's server: a body size limit, and an answer to WebSocket frames it mishandles."""

from __future__ import annotations

import json
from collections.abc import Callable

from fastapi.responses import JSONResponse


class BodyLimit:
    """ASGI middleware: refuse an HTTP body over `limit` bytes with 413 before the app reads it."""

    def __init__(self, app: Callable, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        """Buffer the body up to the limit, then hand it to the app; 413 beyond it."""
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await self._too_large(scope, receive, send)
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return await self.app(scope, _replay([message]), send)
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                return await self._too_large(scope, receive, send)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        await self.app(scope, _replay([{"type": "http.request", "body": body, "more_body": False}]), send)

    async def _too_large(self, scope: dict, receive: Callable, send: Callable) -> None:
        response = JSONResponse(
            status_code=413, content={"detail": f"request body larger than {self.limit} bytes"}
        )
        await response(scope, receive, send)


class FrameCheck:
    """ASGI middleware: a WebSocket frame that is JSON but not an object gets an error frame, and the session goes on.

    openenv's `/ws` loop reads `message["type"]` outside its per-message error handling, so such a frame would end
    the session with an unclear `SESSION_ERROR`; here it is answered like any other malformed message.
    """

    def __init__(self, app: Callable):
        self.app = app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        """Pass everything through except non-object JSON text frames, which are answered here."""
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)

        async def checked_receive() -> dict:
            while True:
                message = await receive()
                text = message.get("text") if message["type"] == "websocket.receive" else None
                if text is None or _is_object_or_not_json(text):
                    return message
                error = {
                    "type": "error",
                    "data": {
                        "message": 'a message must be a JSON object: {"type": ..., "data": ...}',
                        "code": "INVALID_JSON",
                    },
                }
                # openenv's loop is waiting in receive, so this send cannot interleave with one of its own.
                await send({"type": "websocket.send", "text": json.dumps(error)})

        await self.app(scope, checked_receive, send)


def _is_object_or_not_json(text: str) -> bool:
    # openenv parses every frame itself: a frame opening with "{" is an object or invalid JSON, both of which it
    # answers, so only the rare other frames are parsed here (parsing every step's frame twice cost server CPU).
    if text.lstrip(" \t\n\r")[:1] == "{":
        return True
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return True  # openenv answers invalid JSON itself (INVALID_JSON)


def _replay(messages: list[dict]) -> Callable:
    queue = list(messages)

    async def receive() -> dict:
        return queue.pop(0) if queue else {"type": "http.disconnect"}

    return receive
