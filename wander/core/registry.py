"""Things found by name, in one pattern: a `Registry` maps names to what they build, and the layer that owns a thing
registers it (so no layer names one above it). Here: the environments, found in the catalogues by their folders
(`envs/<name>/`, a new folder is an environment as soon as it exists), by any importable module path, or by
`scheme:address` (`openenv:URL`, registered by wander.serve). Policy kinds live in `wander.policies.loading`."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

from wander.core.environment import Environment

T = TypeVar("T")

EnvironmentLoader = Callable[..., Environment]
"""What a `scheme:address` environment name is built by: `loader(name, **kwargs)`, the whole name passed."""


def config_from_kwargs(config_class: type[T], env_name: str, kwargs: dict[str, Any]) -> T:
    """An env's config dataclass from `load_environment` keyword arguments; TypeError naming any unknown one and the
    known ones."""
    known = {f.name for f in dataclasses.fields(config_class)}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise TypeError(f"unknown {env_name} setting(s) {unknown}; known: {sorted(known)}")
    return config_class(**kwargs)


class Registry(Generic[T]):
    """Names and what each stands for (a factory, a package), registered by the layer that owns them."""

    def __init__(self, what: str) -> None:
        """An empty registry of `what` (e.g. "environment scheme"), the word its errors use."""
        self.what = what
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        """Register `item` under `name` and return it; registering the same item again is a no-op, another raises."""
        known = self._items.get(name)
        if known is not None and known is not item:
            raise ValueError(f"{self.what} {name!r} is already registered as {known!r}")
        self._items[name] = item
        return item

    def get(self, name: str) -> T | None:
        """What `name` stands for, or None when nothing is registered under it."""
        return self._items.get(name)

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        """Whether `name` is registered."""
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        """The registered names in registration order."""
        return iter(self._items)


DEFAULT_ENV = "tictactoe"
"""The environment played when none is named: the case study every default is tuned for."""
CATALOGUES: Registry[str] = Registry("environment catalogue")
"""Packages whose sub-folders are the environments found by name, each with a one-line description (the project's
`envs`, registered at the package's entry, wander/__init__.py)."""
ENVIRONMENT_SCHEMES: Registry[EnvironmentLoader] = Registry("environment scheme")
"""`scheme:address` environment names and their loaders (`openenv`, registered by wander.serve)."""


def _catalogue_folders() -> Iterator[tuple[str, Path]]:
    """(catalogue package, environment folder) for every package folder of every catalogue."""
    for catalogue in CATALOGUES:
        spec = importlib.util.find_spec(catalogue)
        if spec is None or not spec.submodule_search_locations:
            continue
        for location in spec.submodule_search_locations:
            for p in Path(location).iterdir():
                if (p / "__init__.py").is_file() and not p.name.startswith(("_", ".")):
                    yield catalogue, p


def environment_names() -> list[str]:
    """The environments of the catalogues: their sub-folders that are packages, sorted."""
    return sorted({p.name for _, p in _catalogue_folders()})


def module_name(name: str) -> str:
    """The module that defines environment `name`: `<catalogue>.<name>` for a catalogue name, else `name` itself."""
    return next((f"{catalogue}.{p.name}" for catalogue, p in _catalogue_folders() if p.name == name), name)


def load_environment(name: str, **kwargs: Any) -> Environment:
    """Build an environment of the catalogue (`tictactoe`), one from any importable module path, or `openenv:URL`."""
    loader = ENVIRONMENT_SCHEMES.get(name.partition(":")[0])
    if loader is not None:
        return loader(name, **kwargs)
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
