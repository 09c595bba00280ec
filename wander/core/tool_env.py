"""Tool-calling environments: Python functions, or the tools of an MCP server, become tools the model can call.

With `mcp=McpServer(...)` the tools are the ones the server lists, shown with the server's own schemas; with
`mcp_session="episode"` each episode starts its own server (a stdio command is run again) and stops it when the
episode is scored, else one session serves every episode. An env with local tools may route their calls to a
server per episode instead (`tool_server`, how `tools_over: mcp` serves an env's own tools through
`wander env mcp`); the server's episode state then comes back before scoring (`STATE_URI`).
"""

from __future__ import annotations

import contextvars
import inspect
import json
import re
import sys
import typing
from collections.abc import Callable
from typing import Any

from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.core.mcp_client import McpClient, McpServer, McpServerGone, listed_schemas, tool_function
from wander.core.parser import last_assistant_content
from wander.core.policy import Message

TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)

TOOL_PROMPT = """You can call these tools. To call one, answer with
<tool_call>{{"name": "<tool name>", "arguments": {{<arguments as JSON>}}}}</tool_call>
Each result comes back in a tool message. When you have the final answer, reply without a tool call.

Tools:
{schemas}"""


STATE_URI = "wander://episode/state"  # where `wander env mcp` serves its episode's state (JSON)
SERVER_STATE_SKIPPED = frozenset({"turn", "done", "tool_calls"})  # the client's own count of these


def tool_schema(func: Callable) -> dict:
    """OpenAI-style JSON schema of a typed, Google-style-docstring function (a server's tool: its listing)."""
    if hasattr(func, "mcp_schema"):
        return func.mcp_schema
    from transformers.utils import get_json_schema  # lazy: transformers costs ~1 s to import

    try:
        return get_json_schema(func)
    except Exception as exc:
        raise ValueError(
            f"tool {getattr(func, '__name__', func)!r} cannot become a schema ({exc}); give it type hints "
            "and a docstring with an 'Args:' section describing every argument"
        ) from exc


def forwarding(func: Callable, call: Callable[..., Any], method: bool = False) -> Callable[..., Any]:
    """A function with `func`'s name, signature, resolved hints and docstring that calls `call(**arguments)`
    (`method`: a method, `call(self, **arguments)`): what a library that reads a tool's schema from its function
    (TRL, FastMCP) takes in the tool's place."""

    def forward(*self: Any, **arguments: Any) -> Any:
        return call(*self, **arguments)

    signature = inspect.signature(func)
    if method:
        first = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        signature = signature.replace(parameters=[first, *signature.parameters.values()])
    forward.__signature__ = signature
    # Resolved hints: the tool's string annotations would otherwise be evaluated in the caller's module. A schema
    # keeps the tool's return type, as env.tool_schemas does, though the result reaches the model as text.
    forward.__annotations__ = typing.get_type_hints(func)
    forward.__name__ = forward.__qualname__ = func.__name__
    forward.__doc__ = func.__doc__
    return forward


class ToolEnv(Environment):
    """The model calls tools in `<tool_call>` JSON; results (or errors) return as tool messages.

    The episode ends when the model answers without a tool call, or at `max_turns`. `tools_over="mcp"` runs the
    env's own tools in a `wander env mcp NAME --spec ...` server per episode, over stdio: the same calls, answers
    and final state as in process, through the protocol.
    """

    # The episode's own server session while its tool call runs (set per call: episodes step on threads).
    _current: contextvars.ContextVar[McpClient | None] = contextvars.ContextVar("mcp_session", default=None)

    def __init__(
        self,
        *,
        tools: list[Callable] = (),
        system_prompt: str = "",
        max_turns: int = 10,
        mcp: McpServer | None = None,
        mcp_session: str = "shared",
        tools_over: str = "local",
        **kwargs: Any,
    ):
        if tools_over not in ("local", "mcp"):
            raise ValueError(f"tools_over must be 'local' or 'mcp', got {tools_over!r}")
        if tools_over == "mcp" and mcp is not None:
            raise ValueError(
                "tools_over='mcp' serves the env's own tools; an env with `mcp` calls its server already"
            )
        self.tools_over = tools_over
        if mcp_session not in ("shared", "episode"):
            raise ValueError(f"mcp_session must be 'shared' or 'episode', got {mcp_session!r}")
        self.mcp, self.mcp_session = mcp, mcp_session
        self._shared: McpClient | None = None
        self._clients: dict[int, McpClient] = {}  # per-episode sessions, by id of the episode's state
        tools = list(tools)
        if mcp is not None:
            tools += self._server_tools(mcp)
        if not tools:
            raise ValueError("a tool env needs tools: give `tools` (typed functions) or `mcp` (a server)")
        self.tools = {t.__name__: t for t in tools}
        self.tool_schemas = [tool_schema(t) for t in tools]
        schemas = "\n".join(json.dumps(s) for s in self.tool_schemas)
        prompt = TOOL_PROMPT.format(schemas=schemas)
        super().__init__(
            system_prompt=f"{system_prompt}\n\n{prompt}" if system_prompt else prompt,
            max_turns=max_turns,
            **kwargs,
        )

    def _server_tools(self, server: McpServer) -> list[Callable]:
        """The server's tools as functions; a shared session stays open, a probe for per-episode ones closes."""
        client = McpClient(server)
        try:
            schemas = listed_schemas(client)
        except McpServerGone as exc:  # before any episode: a refusal, as a bad setting is
            raise ValueError(str(exc)) from None
        except ValueError:
            client.close()
            raise
        if self.mcp_session == "shared":
            self._shared = client
        else:
            client.close()
        return [tool_function(s, self._call_server) for s in schemas]

    def tool_server(self, spec: dict) -> McpServer | None:
        """The server an episode of `spec` calls its tools on; None: the local functions (or the shared one)."""
        if self.tools_over == "mcp":
            # `wander env mcp NAME --spec SPEC` without the CLI's imports (a second a server)
            command = [sys.executable, "-m", "wander.core.mcp_server", self.name, json.dumps(spec)]
            return McpServer(command=command)
        return self.mcp if self.mcp is not None and self.mcp_session == "episode" else None

    def start(self, spec: dict) -> Episode:
        """A fresh episode; its own server started when its tools live in one per episode."""
        episode = super().start(spec)
        server = self.tool_server(spec)
        if server is not None:
            self._clients[id(episode.state)] = McpClient(server)
        return episode

    def _call_server(self, name: str, arguments: dict) -> str:
        client = self._current.get() or self._shared
        if client is None:
            raise McpServerGone("this episode's MCP session is closed (the episode was scored)")
        return client.call(name, arguments)

    def finish(self, episode: Episode) -> McpClient | None:
        """Take back the state an episode's own server kept (counters add) and ask its session to close; the
        session, for the caller to wait on (None: the episode had none)."""
        client = self._clients.pop(id(episode.state), None)
        if client is None:
            return None
        try:
            if self.mcp is None:  # the env's own tools served for it: the server's state is the episode's
                served = json.loads(client.read(STATE_URI))
                for key, value in served.items():
                    if key in SERVER_STATE_SKIPPED:
                        continue
                    mine = episode.state.get(key)
                    both_counts = isinstance(value, int) and isinstance(mine, int)
                    episode.state[key] = mine + value if both_counts else value
        except McpServerGone as exc:
            episode.error = episode.error or f"tool server: {exc}"
        client.close(wait=False)
        return client

    def score(self, episodes: Any) -> None:
        """Finish each episode's server session (closed together), then score."""
        closing = [self.finish(episode) for episode in episodes]
        for client in closing:
            if client is not None:
                client.close()
        super().score(episodes)

    def close(self) -> None:
        """Close the shared MCP session and any episode's left open."""
        for client in [self._shared, *self._clients.values()]:
            if client is not None:
                client.close()
        self._shared, self._clients = None, {}

    def env_response(self, messages: list[Message], state: dict) -> list[Message]:
        """Run every tool call of the latest model turn; no call means the model has answered."""
        calls = TOOL_CALL.findall(last_assistant_content(messages) or "")
        if not calls:
            state["done"] = True
            return []
        state["tool_calls"] = state.get("tool_calls", 0) + len(calls)
        return [{"role": "tool", "content": self.call_tool(raw, state)} for raw in calls]

    def call_tool(self, raw: str, state: dict) -> str:
        """Execute one tool call; any failure becomes an error message for the model, except a server that is
        gone (`McpServerGone`), which ends the episode with an error."""
        try:
            call = json.loads(raw)
            name, arguments = call["name"], call.get("arguments", {})
            if name not in self.tools:
                raise KeyError(f"unknown tool {name!r}; available: {sorted(self.tools)}")
            if not isinstance(arguments, dict):
                raise TypeError("arguments must be a JSON object")
            client = self._clients.get(id(state))
            if client is not None and self.mcp is None:  # the env's own tools, served for this episode
                return client.call(name, arguments)
            token = self._current.set(client)
            try:
                result = self.tools[name](**arguments)
            finally:
                self._current.reset(token)
            if inspect.isawaitable(result):
                from wander.core.rubric import _run

                result = _run(result)
            return result if isinstance(result, str) else json.dumps(result)
        except McpServerGone:
            raise
        except Exception as exc:  # noqa: BLE001 - tool errors go back to the model, not up the stack
            state["tool_errors"] = state.get("tool_errors", 0) + 1
            return f"Error: {type(exc).__name__}: {exc}"
