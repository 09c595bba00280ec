"""An env's own tools served as an MCP server (`wander env mcp NAME`), over stdio or streamable HTTP.

The server holds one episode, of the spec it was started with: every tool call runs through the env's own
`call_tool` on that episode's state (the same answers, errors and counters as in process), and the state is a
resource (`wander://episode/state`, JSON) that a wander tool env reads back before it scores the episode. A server
per episode is what `tools_over: mcp` starts, over stdio; a long-lived HTTP server shares its one episode with
every client, which suits tools without state (calculator's) and a look at a workspace by hand.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from wander.core.registry import load_environment
from wander.core.tool_env import STATE_URI, ToolEnv, forwarding


def tools_server(env: ToolEnv, spec: dict, host: str = "127.0.0.1", port: int = 8000) -> Any:
    """A FastMCP server with `env`'s tools acting on one episode of `spec`, and that episode's state."""
    from mcp.server.fastmcp import FastMCP

    if not isinstance(env, ToolEnv):
        raise ValueError(f"env {env.name!r} has no tools to serve over MCP; a tool env (ToolEnv) has")
    episode = env.start(spec)
    server = FastMCP(name=f"wander-{env.name}", host=host, port=port, log_level="WARNING")
    for (name, func), schema in zip(env.tools.items(), env.tool_schemas, strict=True):

        def call(_name: str = name, **arguments: Any) -> str:
            return env.call_tool(json.dumps({"name": _name, "arguments": arguments}), episode.state)

        description = schema["function"].get("description")
        server.add_tool(forwarding(func, call), name=name, description=description, structured_output=False)

    @server.resource(STATE_URI, mime_type="application/json")
    def state() -> str:
        """The episode's state as the env keeps it (the tools' effects, the error count)."""
        return json.dumps(episode.state, default=str)

    return server


def serve_tools(
    name: str,
    settings: dict,
    spec: dict | None = None,
    seed: int = 0,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
) -> None:
    """Load env `name` with `settings` and serve its tools on one episode (`spec`, else `seed`'s) until the
    client leaves (stdio) or an interrupt (HTTP)."""
    try:
        env = load_environment(name, **settings)
    except TypeError as exc:  # an unknown setting: the factory names it
        raise ValueError(str(exc)) from None
    spec = spec if spec is not None else env.make_spec(seed)
    server = tools_server(env, spec, host=host, port=port)
    where = "stdio" if transport == "stdio" else f"http://{host}:{port}/mcp"
    # stdout is the protocol's channel over stdio: the banner goes to stderr.
    print(
        f"{env.name}'s tools over MCP at {where}, episode seed {spec.get('seed')}",
        file=sys.stderr,
        flush=True,
    )
    server.run("stdio" if transport == "stdio" else "streamable-http")


if (
    __name__ == "__main__"
):  # what `tools_over: mcp` starts per episode: NAME SPEC_JSON, without the CLI's imports
    serve_tools(sys.argv[1], {}, json.loads(sys.argv[2]))
