"""ASGI guards in front of openenv's server: a body size limit (`wander.core.body_limit`, shared by every wander
server), an answer to WebSocket frames it mishandles, and a 422 that never echoes the request body."""

from __future__ import annotations

import json
from collections.abc import Callable

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from wander.core.body_limit import BodyLimit

# BodyLimit is the core's, re-exported for the servers that import it from here.
__all__ = ["BodyLimit", "FrameCheck", "validation_error"]


def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    """422 naming each invalid field (`type`, `loc`, `msg`), without the input that failed.

    FastAPI's own handler returns each error's `input`: a body that is not UTF-8, or a JSON `NaN`, cannot be
    encoded back as JSON, so a client's bad request ended as a 500 (found by the fuzz test).
    """
    errors = [
        {"type": str(e.get("type")), "loc": [p if isinstance(p, int) else str(p) for p in e.get("loc", ())]}
        | {"msg": str(e.get("msg"))}
        for e in exc.errors()
    ]
    return JSONResponse(status_code=422, content={"detail": errors})


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
