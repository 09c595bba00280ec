"""`wander env serve`, `wander env mcp`, `wander env init` and `wander teacher serve`: an env over OpenEnv's
protocol, an env's tools over MCP, a new env's folder, an env's embedded teacher over the OpenAI protocol."""

from __future__ import annotations

import argparse
from typing import Any

from wander.cli.arguments import env_setting, port_number, positive_float, positive_int
from wander.core.registry import DEFAULT_ENV, load_environment
from wander.scaffold import DEFAULT_KIND, KINDS, init_environment
from wander.serve.limits import CLIENT_SHARE, IDLE_TTL_S, MAX_SESSIONS, per_client_limit


def teacher_command(args: argparse.Namespace) -> int:
    """Serve an env's embedded teacher over the OpenAI protocol until interrupted."""
    from wander.policies.openai_server import serve_forever, teacher_app

    env = load_environment(args.env)
    skill, model = env.teacher_skill if args.skill is None else args.skill, args.model or env.teacher_model
    app = teacher_app(env, skill, model)
    print(f"teacher {model!r} (skill {skill}) at http://{args.host}:{args.port}/v1")
    serve_forever(app, host=args.host, port=args.port)
    return 0


def env_serve_command(args: argparse.Namespace) -> int:
    """Serve an environment over OpenEnv's protocol until interrupted."""
    from wander.serve.server import serve_env_forever
    from wander.serve.workers import serve_env_workers, session_shares

    shares = session_shares(args.max_sessions, args.workers)  # a bad split is an error before the env loads
    per_client = per_client_limit(args.max_sessions, args.max_sessions_per_client)
    if args.web and args.workers > 1:
        raise ValueError("--web serves one shared browser episode from one process: drop --workers or --web")
    try:
        env = load_environment(args.name, **dict(args.settings))
    except TypeError as exc:  # an unknown setting: the factory names it
        raise ValueError(str(exc)) from None
    workers = f", {args.workers} worker processes with {shares} sessions" if args.workers > 1 else ""
    web = f"; OpenEnv's web interface at http://{args.host}:{args.port}/web/" if args.web else ""
    print(
        f"environment {env.name!r} over OpenEnv at http://{args.host}:{args.port} (WebSocket sessions at /ws, "
        f"at most {args.max_sessions}, {per_client} per client, idle TTL {args.idle_ttl:g} s{workers}){web}",
        flush=True,
    )
    options = dict(
        max_sessions=args.max_sessions,
        max_sessions_per_client=per_client,
        idle_ttl_s=args.idle_ttl,
        threaded=args.threaded,
        reset_seed=args.seed,
        web=args.web,
    )
    if args.workers > 1:
        return serve_env_workers(env, host=args.host, port=args.port, workers=args.workers, **options)
    serve_env_forever(env, host=args.host, port=args.port, **options)
    return 0


def env_mcp_command(args: argparse.Namespace) -> int:
    """Serve an env's tools, acting on one episode, as an MCP server until its client leaves or interrupted."""
    import json

    from wander.core.mcp_server import serve_tools

    try:
        spec = json.loads(args.spec) if args.spec else None
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"--spec is not JSON ({exc}); give an episode spec as the env's splits hold it"
        ) from None
    serve_tools(args.name, dict(args.settings), spec, args.seed, args.transport, args.host, args.port)
    return 0


def env_init_command(args: argparse.Namespace) -> int:
    """Scaffold a working environment folder envs/NAME and say how to run it."""
    folder = init_environment(args.name, kind=args.kind)
    print(
        f"created {folder}/ ({args.kind}: factory, rubric, teacher, README.md, recipe.yaml, test_{args.name}.py); try it:\n"
        f"  pytest {folder}\n  wander eval --env {args.name} --games 4\n  dvc exp run -S env.name={args.name}"
    )
    return 0


def register(sub: Any) -> None:
    """Add `teacher serve`, `env serve` and `env init` to the `wander` parser's subparsers."""
    teacher = sub.add_parser("teacher", help="the embedded teacher model server")
    teacher_sub = teacher.add_subparsers(dest="teacher_command", required=True)
    serve = teacher_sub.add_parser(
        "serve", help="serve the teacher over the OpenAI Chat Completions protocol"
    )
    serve.add_argument("--host", default="127.0.0.1", help="interface to bind (default loopback only)")
    serve.add_argument("--port", type=port_number, default=8000, help="port (default 8000)")
    serve.add_argument("--env", default=DEFAULT_ENV, help="environment whose teacher to serve")
    serve.add_argument(
        "--skill",
        type=float,
        default=None,
        help="slip rate (tictactoe: random-move probability in quiet positions); default: the env's",
    )
    serve.add_argument("--model", default=None, help="model name the server answers to; default: the env's")
    serve.set_defaults(func=teacher_command)

    env_cmd = sub.add_parser("env", help="environments: serve one or its tools, or scaffold a new one")
    env_sub = env_cmd.add_subparsers(dest="env_command", required=True)
    env_serve = env_sub.add_parser(
        "serve", help="serve an environment over OpenEnv's protocol (WebSocket sessions, Task API)"
    )
    env_serve.add_argument("name", help="registered environment (tictactoe) or module path")
    env_serve.add_argument(
        "settings",
        nargs="*",
        type=env_setting,
        metavar="KEY=VALUE",
        help="environment settings, e.g. rendering=compact max_turns=8 history=full",
    )
    env_serve.add_argument("--host", default="127.0.0.1", help="interface to bind (default loopback only)")
    env_serve.add_argument("--port", type=port_number, default=8000, help="port (default 8000)")
    env_serve.add_argument(
        "--max-sessions",
        type=positive_int,
        default=MAX_SESSIONS,
        help=f"concurrent sessions, WebSocket and HTTP MCP together (default {MAX_SESSIONS})",
    )
    env_serve.add_argument(
        "--max-sessions-per-client",
        type=positive_int,
        default=None,
        help="sessions one client (an IP address; behind a proxy, the proxy) may hold at once "
        f"(default {CLIENT_SHARE * 100:g}%% of --max-sessions)",  # %%: argparse %-formats help
    )
    env_serve.add_argument(
        "--idle-ttl",
        type=positive_float,
        default=IDLE_TTL_S,
        help=f"seconds before an idle session of either kind is closed (default {IDLE_TTL_S:g})",
    )
    env_serve.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        help="server processes sharing the port, each stepping on its own core; --max-sessions is split "
        "among them (default 1)",
    )
    env_serve.add_argument(
        "--threaded",
        action="store_true",
        help="run each session's steps in its own thread (for environments that block on I/O)",
    )
    env_serve.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the episode seeds drawn for a reset that names none (reset with no arguments; default 0)",
    )
    env_serve.add_argument(
        "--web", action="store_true", help="also serve OpenEnv's Gradio web interface at /web/"
    )
    env_serve.set_defaults(func=env_serve_command)
    env_mcp = env_sub.add_parser(
        "mcp", help="serve an environment's tools as an MCP server (stdio or streamable HTTP), on one episode"
    )
    env_mcp.add_argument("name", help="a tool environment (calculator, workplace_assistant) or module path")
    env_mcp.add_argument(
        "settings", nargs="*", type=env_setting, metavar="KEY=VALUE", help="environment settings"
    )
    env_mcp.add_argument("--spec", default=None, help="the episode's spec as JSON (default: --seed's)")
    env_mcp.add_argument("--seed", type=int, default=0, help="the episode's seed when no --spec (default 0)")
    env_mcp.add_argument(
        "--transport", choices=["stdio", "http"], default="stdio", help="stdio (default) or streamable HTTP"
    )
    env_mcp.add_argument("--host", default="127.0.0.1", help="interface to bind over HTTP (default loopback)")
    env_mcp.add_argument("--port", type=port_number, default=8000, help="port over HTTP (default 8000)")
    env_mcp.set_defaults(func=env_mcp_command)
    env_init = env_sub.add_parser(
        "init",
        help="scaffold a working environment folder envs/NAME (factory, rubric, teacher, README, recipe, test), "
        "found by its name with no edit elsewhere; run from the project root",
    )
    env_init.add_argument("name", help="the new environment's name: lowercase letters, digits, underscores")
    env_init.add_argument(
        "--kind",
        choices=list(KINDS),
        default=DEFAULT_KIND,
        help=f"the starter task's kind (default {DEFAULT_KIND})",
    )
    env_init.set_defaults(func=env_init_command)
