"""Where a stage plays its episodes: here, or on the environment server at `env.url`.

Each stage that plays episodes (synthesize, grpo, evaluate, and register's replay of the champion) builds the
params' environment here as it always did, then plays in `episode_env(params.env, env)`. With `env.url: null` that
is the local env itself. With a URL it is `load_environment("openenv:<url>", local=env)`: episodes are stepped on
the server, from the full specs this side sends, and scored with this side's rubric weights, so they are the local
episodes byte for byte. What is not episode stepping stays local: the specs, exact evaluation and learning curves
(the solver forces replies into local state), curation's replays, the tokenizer corpus, the report's boards.
"""

from __future__ import annotations

import json
import logging
import shlex
from urllib.parse import urlsplit

from tasks.params.shared_sections import Env
from tasks.runtime.validation import InputError
from wander import Environment, load_environment
from wander.core.logs import redact_url

logger = logging.getLogger(__name__)
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def episode_env(section: Env, local: Environment, live: int = 1) -> Environment:
    """The env a stage plays episodes in: `local`, or with `env.url` set, `local` served there, checked to play
    the same game with room for the `live` episodes the stage keeps open at once (one session each, all from this
    machine: one client of the server, whose per-client share must hold them too)."""
    if section.url is None:
        return local
    from wander.serve.client import RemoteError  # lazy: local runs need no OpenEnv client

    shown, command = redact_url(section.url), serve_command(section, live)
    try:
        served = load_environment(f"openenv:{section.url}", local=local)
    except (RemoteError, ValueError) as exc:  # no server, not a wander one, another game, or not JSON
        raise InputError(
            f"env.url: {redact_url(str(exc))}\nstart the env section's environment there with\n  {command}\n"
            "or set env.url: null to play the episodes here"
        ) from None
    capacity = served.info.get("max_sessions")
    if capacity is not None and live > capacity:
        raise InputError(
            f"env.url: this stage plays {live} episodes at once, one session each, but the server at {shown} "
            f"takes at most {capacity} sessions; restart it with\n  {command}"
        )
    per_client = served.info.get("max_sessions_per_client")  # absent from servers older than the share
    if per_client is not None and live > per_client:
        raise InputError(
            f"env.url: this stage plays {live} episodes at once, one session each, but the server at {shown} "
            f"lets one client (this machine) hold at most {per_client} sessions; restart it with\n  {command}"
        )
    logger.info("episodes of %s play on the server at %s", local.name, shown)
    return served


def serve_command(section: Env, live: int = 1) -> str:
    """The `wander env serve` command that serves the env section's environment at `env.url`'s port, with room
    for `live` sessions from one client."""
    from wander.serve.limits import MAX_SESSIONS, default_per_client

    parts = urlsplit(section.url or "http://127.0.0.1:8000")
    words = ["wander", "env", "serve", section.name]
    for key, value in section.settings().items():  # right after the name: argparse reads them before options
        text = value if isinstance(value, str) else json.dumps(value)  # a tuple as a YAML flow list
        words.append(f"{key}={text}")
    if parts.hostname not in LOOPBACK:
        words += ["--host", "0.0.0.0"]  # reachable from the machine that runs the stages
    words += ["--port", str(parts.port or (443 if parts.scheme == "https" else 80))]
    cap = max(live, MAX_SESSIONS)
    if cap > MAX_SESSIONS:
        words += ["--max-sessions", str(cap)]
    if live > default_per_client(cap):
        words += ["--max-sessions-per-client", str(live)]
    return shlex.join(words)
