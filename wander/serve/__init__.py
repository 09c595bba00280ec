"""Environments over HTTP, the OpenEnv way: serve any wander environment, use any OpenEnv server as one.

Importing this package registers the `openenv:URL` environment name (`load_environment("openenv:http://...")`);
the server and client load only when such a name is used."""

from __future__ import annotations

from typing import Any

from wander.core.environment import Environment
from wander.core.registry import ENVIRONMENT_SCHEMES


def load_openenv(name: str, **kwargs: Any) -> Environment:
    """`openenv:http://host:port` as a wander environment (wander.serve.served.load_remote, imported here)."""
    from wander.serve.served import load_remote

    return load_remote(name, **kwargs)


ENVIRONMENT_SCHEMES.register("openenv", load_openenv)
