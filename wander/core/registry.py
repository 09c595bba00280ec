"""Environments by name: each is a folder of the `envs` catalogue (or any module) with a `load_environment(**kwargs)`
factory. Names are found by looking, not listed: a new folder under envs/ is an environment as soon as it exists."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

from wander.core.environment import Environment

DEFAULT_ENV = "tictactoe"
"""The environment played when none is named: the case study every default is tuned for."""
CATALOGUE = "envs"
"""The package whose sub-folders are the environments found by name."""
SCHEMES = {"openenv": "wander.serve.served:load_remote"}
"""`scheme:address` names and the loader (`module:function`, imported when used) that builds them: like the
catalogue, found at run time, so the core names no layer above it."""


def environment_names() -> list[str]:
    """The environments of the catalogue: its sub-folders that are packages, sorted."""
    spec = importlib.util.find_spec(CATALOGUE)
    if spec is None or not spec.submodule_search_locations:
        return []
    return sorted(
        p.name
        for location in spec.submodule_search_locations
        for p in Path(location).iterdir()
        if (p / "__init__.py").is_file() and not p.name.startswith(("_", "."))
    )


def module_name(name: str) -> str:
    """The module that defines environment `name`: `envs.<name>` for a catalogue name, else `name` itself."""
    return f"{CATALOGUE}.{name}" if name in environment_names() else name


def load_environment(name: str, **kwargs: Any) -> Environment:
    """Build an environment of the catalogue (`tictactoe`), one from any importable module path, or `openenv:URL`."""
    scheme = name.partition(":")[0]
    if scheme in SCHEMES:
        module, _, function = SCHEMES[scheme].partition(":")
        return getattr(importlib.import_module(module), function)(name, **kwargs)
    module_path = module_name(name)
    try:
        module = importlib.import_module(module_path)
    except ModuleNotFoundError as exc:
        if exc.name != module_path:
            raise
        raise ValueError(
            f"unknown environment {name!r}: not one of {environment_names()} and no module {module_path!r}; "
            "pass an environment's name or the import path of a module that defines load_environment() "
            "(`wander env init NAME` makes a new one under envs/)"
        ) from exc
    if not hasattr(module, "load_environment"):
        raise ValueError(f"module {module_path!r} has no load_environment(**kwargs) factory")
    return module.load_environment(**kwargs)
