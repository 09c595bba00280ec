"""Tools from an MCP server: a blocking client over stdio or streamable HTTP, and its tools as typed Python
functions a `ToolEnv` takes like its own.

The `mcp` package's client is async and its session lives inside nested context managers; an env's turns are
blocking calls. So each `McpClient` runs one event loop on a thread of its own, holds the session open there, and
answers `call` and `read` by submitting coroutines to it. A tool that answers an error (`isError`) or a call past
its timeout raises `McpToolError`, which the tool env shows the model as a tool message; a server that is gone
(killed, its transport closed) raises `McpServerGone`, which ends that episode with an error.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

CALL_TIMEOUT_S = 30.0  # a tool call past this is an error the model reads (a slow tool is the tool's problem)
START_TIMEOUT_S = (
    60.0  # starting the server, its handshake and its tool list: a server process may import much
)
REQUEST_TIMEOUT = 408  # the code `mcp`'s session answers a request past its read timeout with (HTTP's)
JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}


class McpToolError(RuntimeError):
    """A tool call the server answered with an error, or that did not finish in time: the model is told."""


class McpServerGone(RuntimeError):
    """The MCP server cannot be reached any more (killed, its transport closed): the episode ends with an error."""


@dataclass(frozen=True)
class McpServer:
    """Where an MCP server is: a command to start over stdio, or a streamable-HTTP URL (`http://host:port/mcp`)."""

    command: list[str] = field(default_factory=list)
    url: str | None = None
    call_timeout_s: float = CALL_TIMEOUT_S
    cwd: str | None = None

    def __post_init__(self) -> None:
        if bool(self.command) == bool(self.url):
            raise ValueError(
                "an MCP server is a stdio command or a streamable-HTTP URL, exactly one of them; got "
                f"command={self.command!r}, url={self.url!r}"
            )
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"MCP url {self.url!r} is not http(s)://; write e.g. http://127.0.0.1:8000/mcp")

    def describe(self) -> str:
        """The server as a user named it: its URL or its command line."""
        return self.url or " ".join(self.command)


class McpClient:
    """One MCP session, started on construction; `tools` is what the server listed (waited for on first use, so
    that a batch of episodes starts its servers at once)."""

    def __init__(self, server: McpServer):
        self.server = server
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-client", daemon=True)
        self._thread.start()
        self._closing: asyncio.Event | None = None
        self._session: Any = None
        self._ready: Future = Future()
        self._main = asyncio.run_coroutine_threadsafe(self._hold(self._ready), self._loop)

    @property
    def tools(self) -> list[Any]:
        """The server's tools as it listed them; `McpServerGone` when it did not start or answer."""
        try:
            return self._ready.result(START_TIMEOUT_S)
        except Exception as exc:
            self.close()
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise McpServerGone(
                f"the MCP server {self.server.describe()} did not start or answer its tool list ({detail}); "
                "check the command or URL (a stdio server must speak MCP on stdout, an HTTP one serve /mcp)"
            ) from None

    async def _hold(self, ready: Future) -> None:
        """Open the transport and the session, list the tools, then keep both open until `close`."""
        from mcp import ClientSession

        self._closing = asyncio.Event()
        try:
            async with self._transport() as streams, ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                listed = await session.list_tools()
                self._session = session
                ready.set_result(listed.tools)
                await self._closing.wait()
        except BaseException as exc:  # noqa: BLE001 - the opener waits on `ready`; a later failure ends calls
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
        finally:
            self._session = None

    def _transport(self) -> Any:
        if self.server.url:
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(self.server.url)  # each call's own timeout bounds it
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        command, *args = self.server.command
        # The server inherits this process's environment (the default passes only HOME, PATH and a few).
        params = StdioServerParameters(command=command, args=args, env=dict(os.environ), cwd=self.server.cwd)
        return stdio_client(params, errlog=open(os.devnull, "w"))  # noqa: SIM115 - the transport owns it

    def _submit(self, make: Callable[[Any], Any]) -> Any:
        self.tools  # noqa: B018 - waits for the session
        session = self._session
        if session is None or self._main.done():
            raise McpServerGone(f"the MCP server {self.server.describe()} is gone")
        future = asyncio.run_coroutine_threadsafe(make(session), self._loop)
        try:
            return future.result(self.server.call_timeout_s + 5)
        except TimeoutError:
            future.cancel()
            raise McpToolError(f"no answer in {self.server.call_timeout_s:g} s") from None
        except Exception as exc:
            from mcp.shared.exceptions import McpError
            from mcp.types import CONNECTION_CLOSED

            code = exc.error.code if isinstance(exc, McpError) else None
            if code == REQUEST_TIMEOUT:
                raise McpToolError(f"no answer in {self.server.call_timeout_s:g} s") from None
            if code is not None and code != CONNECTION_CLOSED and not self._main.done():
                raise McpToolError(str(exc)) from None
            raise McpServerGone(
                f"the MCP server {self.server.describe()} is gone ({type(exc).__name__}: {exc})"
            ) from None

    def call(self, name: str, arguments: dict) -> str:
        """A tool's answer as text; `McpToolError` when it answered an error."""
        timeout = timedelta(seconds=self.server.call_timeout_s)
        result = self._submit(lambda s: s.call_tool(name, arguments, read_timeout_seconds=timeout))
        text = content_text(result.content)
        if result.isError:
            raise McpToolError(text or f"tool {name!r} failed")
        return text

    def read(self, uri: str) -> str:
        """A resource's text (`wander env mcp` serves the episode's state at `wander://episode/state`)."""
        from pydantic import AnyUrl

        result = self._submit(lambda s: s.read_resource(AnyUrl(uri)))
        return "".join(getattr(c, "text", "") for c in result.contents)

    def close(self, wait: bool = True) -> None:
        """End the session and its transport (a stdio server process is terminated) and the loop's thread;
        `wait=False` only asks, and a later `close()` waits (to close many at once)."""
        if self._closing is not None and not self._closing.is_set():
            self._loop.call_soon_threadsafe(self._closing.set)
        if not wait:
            return
        try:
            self._main.result(10)
        except Exception:  # noqa: BLE001 - closing a session that already failed
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def content_text(content: list[Any]) -> str:
    """A tool result's content blocks as the text the model reads (non-text blocks as their JSON)."""
    parts = [c.text if getattr(c, "type", None) == "text" else c.model_dump_json() for c in content]
    return "\n".join(parts)


def openai_schema(tool: Any) -> dict:
    """An MCP tool's listing as the OpenAI-style function schema a tool env shows the model."""
    parameters = dict(tool.inputSchema or {"type": "object", "properties": {}})
    parameters.pop("title", None)
    for spec in parameters.get("properties", {}).values():
        spec.pop("title", None)  # FastMCP adds one per argument; a local tool's schema has none
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description or "", "parameters": parameters},
    }


def tool_function(schema: dict, call: Callable[[str, dict], str]) -> Callable[..., str]:
    """A Python function with the schema's name, arguments and docstring that forwards to `call(name, args)`:
    what a `ToolEnv` and TRL's `environment_factory` take, for a tool that lives in a server."""
    function = schema["function"]
    name, parameters = function["name"], function.get("parameters", {})
    properties, required = parameters.get("properties", {}), set(parameters.get("required", []))
    params, hints, docs = [], {}, []
    for arg, spec in properties.items():
        hint = JSON_TYPES.get(spec.get("type"), Any)
        default = inspect.Parameter.empty if arg in required else spec.get("default")
        params.append(
            inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint)
        )
        hints[arg] = hint
        docs.append(f"    {arg}: {spec.get('description') or spec.get('type') or 'a value'}")

    def forward(**arguments: Any) -> str:
        return call(name, arguments)

    forward.__name__ = forward.__qualname__ = name
    forward.__signature__ = inspect.Signature(params, return_annotation=str)
    forward.__annotations__ = {**hints, "return": str}
    description = function.get("description") or name
    forward.__doc__ = f"{description}\n\nArgs:\n" + "\n".join(docs) if docs else description
    forward.mcp_schema = schema  # the server's own listing: what the model is shown
    return forward


def listed_schemas(client: McpClient) -> list[dict]:
    """The client's tools as OpenAI-style schemas; refused when the server lists none."""
    if not client.tools:
        raise ValueError(
            f"the MCP server {client.server.describe()} lists no tools; a tool env needs at least one (check "
            "that the server registers its tools before it starts serving)"
        )
    return [openai_schema(t) for t in client.tools]
