"""Environments by name: each is a module with a `load_environment(**kwargs)` factory."""

from __future__ import annotations

import importlib
from typing import Any

from envs.environment import Environment

BUILTIN = {
    "tictactoe": "envs.tictactoe",
    "reverse_text": "envs.reverse_text",
    "double_check": "envs.double_check",
    "calculator": "envs.calculator",
    "workplace_assistant": "envs.workplace_assistant",
}


def load_environment(name: str, **kwargs: Any) -> Environment:
    """Build a registered environment (`tictactoe`), one from any importable module path, or `openenv:URL`."""
    if name.startswith("openenv:"):
        from envs.remote.client import load_remote  # lazy: only remote environments need the openenv client

        return load_remote(name, **kwargs)
    module_name = BUILTIN.get(name, name)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise ValueError(
            f"unknown environment {name!r}: not one of {sorted(BUILTIN)} and no module {module_name!r}; "
            "pass a built-in name or the import path of a module that defines load_environment()"
        ) from exc
    if not hasattr(module, "load_environment"):
        raise ValueError(f"module {module_name!r} has no load_environment(**kwargs) factory")
    return module.load_environment(**kwargs)
