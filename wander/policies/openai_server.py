"""Serve any Policy over the OpenAI Chat Completions protocol (the embedded teacher, scripted players, tests).

Token counts in `usage`: the server has no tokenizer, so unless the policy returns exact token ids, a token
is a run of word characters or a single punctuation mark (`re.findall(r"\\w+|[^\\w\\s]", text)`), counted
over the content of every message for `prompt_tokens` and over every choice for `completion_tokens`.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Literal

import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from starlette.exceptions import HTTPException as StarletteHTTPException

from wander.core.body_limit import BodyLimit
from wander.core.environment import Environment
from wander.core.policy import Conversation, Policy, Reply, UnplayableRequest
from wander.core.process_tree import stop_when_gone

MAX_N = 128  # a guard against a typo asking for a million completions
# A request body larger than this is refused with 413 before it is read: 1 MiB holds a conversation far longer than
# any context a served policy reads, and a bound keeps one client from making the server buffer gigabytes.
MAX_BODY_BYTES = 1 << 20
_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Approximate token count: runs of word characters plus single punctuation marks."""
    return len(_TOKEN.findall(text))


class TextPart(BaseModel):
    """A text content part; the only kind a text policy can read."""

    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    """One message of a request; unknown fields (name, tool_calls, tool_call_id) pass through."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _content_shape(cls, value: object) -> object:
        # One clear message instead of pydantic's error per union member.
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, list) and all(
            isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in value
        ):
            return value
        raise ValueError("content must be a string or a list of text parts {'type': 'text', 'text': ...}")

    @model_validator(mode="after")
    def _content_required(self) -> ChatMessage:
        # Only an assistant message that carries tool calls may omit its content, as in OpenAI's API.
        if self.content is None and self.role != "assistant":
            raise ValueError(f"a {self.role} message needs a content")
        return self

    def text(self) -> str:
        """The content as plain text, parts joined."""
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class ChatCompletionRequest(BaseModel):
    """The part of a Chat Completions request this server reads; other fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    n: int = Field(default=1, ge=1, le=MAX_N)
    seed: int | None = None
    stream: bool | None = False


class ErrorDetail(BaseModel):
    """What went wrong, shaped like OpenAI's errors."""

    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    """The body of every error response."""

    error: ErrorDetail


def _documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` of a route: each error status with its meaning and the error body's schema."""
    meaning = {
        400: "Invalid request: not JSON, a missing or mistyped field, stream=true.",
        404: "No such model on this server.",
        413: "The request body is larger than the server's limit (1 MiB by default).",
        422: "A well-formed request the model cannot answer (e.g. no board in the last user message, the last "
        "message not from the user, a finished or impossible board); the message names the problem. "
        "Not worth retrying.",
        500: "The server failed; worth retrying.",
    }
    return {status: {"model": ErrorResponse, "description": meaning[status]} for status in statuses}


def openai_error(
    status: int,
    message: str,
    param: str | None = None,
    code: str | None = None,
    kind: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """A JSON error response shaped like OpenAI's."""
    kind = kind or ("invalid_request_error" if status < 500 else "server_error")
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(status_code=status, content=body, headers=headers)


def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        detail = errors[0].get("ctx", {}).get("error", "invalid JSON")
        return openai_error(400, f"The request body is not valid JSON: {detail}.", code="invalid_json")
    parts, params = [], []
    for e in errors[:5]:
        # FastAPI prefixes locations with "body"; OpenAI names params like "messages.0.role".
        loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body")
        params.append(loc or None)
        parts.append(f"{loc or 'body'}: {e.get('msg', 'invalid value')}")
    return openai_error(400, "Invalid request: " + "; ".join(parts), param=params[0], code="invalid_value")


def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
    # Starlette's 405 names the allowed methods in its headers: `Allow` must reach the client.
    return openai_error(exc.status_code, str(exc.detail), code=code, headers=getattr(exc, "headers", None))


def _server_error(_: Request, exc: Exception) -> JSONResponse:
    return openai_error(500, f"Internal server error: {type(exc).__name__}: {exc}")


def _too_large(limit: int) -> dict[str, Any]:
    message = f"The request body is larger than this server's limit of {limit} bytes."
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": None,
            "code": "body_too_large",
        }
    }


def create_app(
    make_policy: Callable[[int], Policy], model_name: str, max_body_bytes: int = MAX_BODY_BYTES
) -> FastAPI:
    """A FastAPI app answering /v1/chat/completions with `make_policy(request seed)`; bodies over
    `max_body_bytes` get 413 in OpenAI's error shape."""
    app = FastAPI(title=f"wander OpenAI-compatible server ({model_name})", docs_url=None, redoc_url=None)
    app.add_middleware(BodyLimit, limit=max_body_bytes, error_body=_too_large)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _server_error)
    created = int(time.time())

    def model_card() -> dict:
        return {"id": model_name, "object": "model", "created": created, "owned_by": "wander"}

    def unknown_model(name: str) -> JSONResponse:
        message = f"The model {name!r} does not exist; this server serves {model_name!r}."
        return openai_error(404, message, param="model", code="model_not_found")

    @app.get("/v1/models", responses=_documented(500))
    def list_models() -> dict:
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{name:path}", responses=_documented(404, 500))
    def get_model(name: str) -> Any:
        return model_card() if name == model_name else unknown_model(name)

    @app.post("/v1/chat/completions", responses=_documented(400, 404, 413, 422, 500))
    async def chat_completions(request: ChatCompletionRequest) -> Any:
        if request.stream:
            return openai_error(
                400, "stream=true is not supported by this server; send stream=false.", param="stream"
            )
        if request.model != model_name:
            return unknown_model(request.model)
        seed = request.seed if request.seed is not None else 0
        conversation: Conversation = [
            {**m.model_dump(exclude_none=True), "content": m.text()} for m in request.messages
        ]
        try:
            # A thread: policies block (a local model, or an OpenAIPolicy running its own loop).
            replies = await run_in_threadpool(_generate, make_policy, seed, conversation, request.n)
        except UnplayableRequest as e:  # the client's conversation, not the server, is at fault
            return openai_error(
                422, f"Cannot answer this conversation: {e}", param="messages", code="unplayable"
            )
        except Exception as e:  # the policy's failure is the server's, and says so
            return openai_error(500, f"The policy failed: {type(e).__name__}: {e}")
        return _completion(model_name, conversation, replies)

    return app


def _generate(
    make_policy: Callable[[int], Policy], seed: int, conversation: Conversation, n: int
) -> list[Reply]:
    replies = make_policy(seed)([conversation] * n)
    if len(replies) != n:
        raise RuntimeError(f"policy returned {len(replies)} replies for {n} conversations")
    return replies


def _completion(model_name: str, conversation: Conversation, replies: list[Reply]) -> dict:
    first = replies[0]
    if first.prompt_ids is not None:
        prompt_tokens = len(first.prompt_ids)
    else:
        prompt_tokens = sum(count_tokens(m["content"]) for m in conversation)
    completion_tokens = sum(
        len(r.completion_ids) if r.completion_ids is not None else count_tokens(r.content) for r in replies
    )
    choices = [
        {
            "index": i,
            "message": {"role": "assistant", "content": r.content, "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
        for i, r in enumerate(replies)
    ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_name,
        "system_fingerprint": "wander",
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


# How a server was started: whether it still runs, and how to stop it (waiting up to a timeout).
Started = tuple[Callable[[], bool], Callable[[float], None]]


def serve_in_thread(
    app: Any, host: str = "127.0.0.1", port: int = 0, **options: Any
) -> contextlib.AbstractContextManager[str]:
    """Run `app` with uvicorn in a background thread; yield its base URL; stop it on exit.

    Options: `startup_timeout` (10 s), `api_path` appended to the URL ("/v1"), `probe_path` that answers once the
    server is up ("/v1/models"); the rest go to uvicorn.
    """
    return _serving(app, _in_thread, host, port, **options)


def serve_in_process(
    app: Any, host: str = "127.0.0.1", port: int = 0, **options: Any
) -> contextlib.AbstractContextManager[str]:
    """`serve_in_thread` in a forked child process: a busy client and the server each get a core instead of
    sharing one interpreter lock. Where fork is not available, a thread serves."""
    forked = "fork" in multiprocessing.get_all_start_methods()
    return _serving(app, _in_child if forked else _in_thread, host, port, **options)


@contextlib.contextmanager
def _serving(
    app: Any,
    start: Callable[[uvicorn.Server, socket.socket, str], Started],
    host: str,
    port: int,
    startup_timeout: float = 10.0,
    api_path: str = "/v1",
    probe_path: str = "/v1/models",
    **uvicorn_options: Any,
) -> Iterator[str]:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Binding here, not in uvicorn, tells us the port that port=0 picked before the server starts.
    sock.bind((host, port))
    port = sock.getsockname()[1]
    netloc = f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}"
    # No log config of uvicorn's own: its loggers follow the process's logging setup, where a stage keeps the
    # per-request access lines off unless asked for (wander/core/logs.py).
    config = uvicorn.Config(
        app, log_config=None, log_level=None, timeout_graceful_shutdown=2, **uvicorn_options
    )
    alive, stop = start(uvicorn.Server(config), sock, f"uvicorn-{port}")
    try:
        _wait_until_answering(f"http://{netloc}{probe_path}", alive, startup_timeout)
        yield f"http://{netloc}{api_path}"
    finally:
        stop(startup_timeout)
        sock.close()


def _in_thread(server: uvicorn.Server, sock: socket.socket, name: str) -> Started:
    """Start `server` on a daemon thread; its liveness check and its stop."""
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name=name)
    thread.start()

    def stop(timeout: float) -> None:
        server.should_exit = True
        thread.join(timeout=timeout)

    return thread.is_alive, stop


def _in_child(server: uvicorn.Server, sock: socket.socket, name: str) -> Started:
    """Start `server` in a forked child process; its liveness check and its stop."""
    child = multiprocessing.get_context("fork").Process(
        target=_serve_until_parent_ends, args=(server, sock, os.getpid()), daemon=True, name=name
    )
    child.start()

    def stop(timeout: float) -> None:
        child.terminate()  # SIGTERM: uvicorn finishes the requests in flight and exits
        child.join(timeout=timeout)
        if child.is_alive():
            child.kill()
            child.join()

    return child.is_alive, stop


def _serve_until_parent_ends(server: uvicorn.Server, sock: socket.socket, parent: int) -> None:
    """The forked child's work: serve, and stop when the parent ends, even killed outright (never an orphan)."""
    # The parent's signal handlers came along with the fork; uvicorn shuts down on SIGTERM and SIGINT, then
    # re-raises the signal, which should then end this process quietly.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    stop_when_gone(parent)
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])


def _wait_until_answering(url: str, alive: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if not alive():
            raise RuntimeError(f"the server died before answering at {url}")
        try:
            httpx.get(url, timeout=1.0)  # any HTTP answer, even an error status, means it is up
            return
        except httpx.TransportError as e:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no answer at {url} after {timeout:.0f}s") from e
            time.sleep(0.02)


def serve_forever(app: Any, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve `app` in the foreground until interrupted (standalone use)."""
    uvicorn.run(app, host=host, port=port, log_level="info")


def teacher_app(env: Environment, skill: float | None = None, model_name: str | None = None) -> FastAPI:
    """An environment's embedded teacher (`env.teacher_policy` at slip rate `skill`, default the env's) as an app
    speaking the OpenAI Chat Completions protocol, answering as `model_name` (default the env's teacher model)."""
    skill = env.teacher_skill if skill is None else skill
    if not 0.0 <= skill <= 1.0:
        raise ValueError(f"teacher skill must be within [0, 1], got {skill}")
    env.teacher_policy(skill, 0)  # an env without a teacher says so before a server starts
    return create_app(lambda seed: env.teacher_policy(skill, seed), model_name or env.teacher_model)
