"""An environment's training recipe: the values of the params keys that depend on the task.

`recipe.yaml` in the env's folder (envs/<name>/recipe.yaml) holds, for the keys of `RECIPE_KEYS`, what that env
trains well with (measured: docs/experiments/environments.md). params.yaml leaves those keys null ("null = the env's
recipe"), so switching `env.name` (`dvc exp run -S env.name=reverse_text`) switches the recipe with it; a value set in
params.yaml or by a profile wins over the recipe; an env without a recipe file trains with the default env's.
`load_params` fills them, so every stage, the preflight and the run summary read the same numbers, and the stages
that read them list the recipe file as a DVC dep (an env of the catalogue has one: `wander env init` writes it).
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import operator
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tasks.params.nested_keys import flatten
from tasks.params.yaml_file import ParamsError, read_yaml

RECIPE_FILE = "recipe.yaml"
RECIPE_KEYS = (
    "build_model.scratch.vocab_size",
    "sft.num_train_epochs",
    "sft.per_device_train_batch_size",
    "sft.learning_rate",
    "grpo.learning_rate",
    "grpo.play_on",
    "grpo.stages",
)
"""The params keys an env's recipe sets, each null in params.yaml (docs/pipeline.md, "The env's recipe")."""


def recipe_path(env_name: str) -> Path | None:
    """The recipe file of env `env_name` (a catalogue name or a module path): recipe.yaml in its package folder; None
    when the env is not a package on the path."""
    from wander.core.registry import module_name

    try:
        spec = importlib.util.find_spec(module_name(env_name))
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / RECIPE_FILE


def recipe_of(env_name: str) -> tuple[Path, dict[str, Any]]:
    """The recipe env `env_name` trains with, as (file, {dotted params key: value}): its own recipe.yaml, or the
    default env's when it has none. ParamsError for a recipe that misses a key or sets one a recipe may not."""
    from wander.core.registry import DEFAULT_ENV

    path = recipe_path(env_name)
    borrowed = path is None or not path.is_file()
    if borrowed:
        path = recipe_path(DEFAULT_ENV)  # an env without a recipe (yet) trains like the case study
    values = _recipe_values(read_yaml(path))
    if borrowed and isinstance(values.get("grpo.stages"), Mapping):  # its stages' env settings are that env's
        values["grpo.stages"] = {
            k: {f: v for f, v in s.items() if f != "env"} for k, s in values["grpo.stages"].items()
        }
    unknown, missing = sorted(set(values) - set(RECIPE_KEYS)), sorted(set(RECIPE_KEYS) - set(values))
    if unknown or missing:
        raise ParamsError(
            f"{_shown(path)}: a recipe sets exactly {list(RECIPE_KEYS)}"
            + (f"; {unknown} belong in params.yaml" if unknown else "")
            + (f"; add {missing}" if missing else "")
        )
    return path, values


def apply_recipe(params: Mapping) -> dict:
    """`params` with every null recipe key filled from the recipe of its env (`recipe_of`)."""
    return _filled(params, recipe_of(_env_name(params))[1])


def _recipe_values(data: Mapping) -> dict[str, Any]:
    """A recipe as {dotted params key: value}, a recipe key's value whole (`grpo.stages`: the curriculum)."""
    values: dict[str, Any] = {}
    for key, value in flatten(data, sep=".").items():
        whole = next((k for k in RECIPE_KEYS if key.startswith(f"{k}.")), None)
        if whole is None:
            values[key] = value
        elif whole not in values:
            values[whole] = functools.reduce(operator.getitem, whole.split("."), data)
    return values


def _filled(params: Mapping, recipe: Mapping[str, Any]) -> dict:
    filled = copy.deepcopy(dict(params))
    for key in RECIPE_KEYS:
        *path, field = key.split(".")
        block = filled
        for part in path:
            block = block.setdefault(part, {}) if isinstance(block, dict) else None
        if isinstance(block, dict) and block.get(field) is None:  # not a mapping: the params model reports it
            block[field] = copy.deepcopy(recipe[key])
    return filled


def recipe_line(params: Mapping) -> str:
    """One line: each recipe key's value as the stages read it, marked `(set)` where params.yaml sets it, and the
    recipe file the others come from."""
    env_name = _env_name(params)
    path, recipe = recipe_of(env_name)
    given, used = _recipe_values(params), _recipe_values(_filled(params, recipe))
    grpo = params.get("grpo")
    steps = (
        grpo.get("max_steps") if isinstance(grpo, Mapping) else None
    )  # every stage's, when a profile sets it
    parts = [
        f"{key} {_shown_value(used[key], steps)}" + (" (set)" if given.get(key) is not None else "")
        for key in RECIPE_KEYS
        if key in used
    ]
    own = path == recipe_path(env_name)
    whose = _shown(path) if own else f"it has none: {_shown(path)}"
    return f"recipe (null = env {env_name}'s; {whose}): " + ", ".join(parts)


def _shown_value(value: Any, steps: int | None) -> str:
    """A recipe value as the line shows it: a curriculum as its stages and their steps (`{wide 40, strong 60}`),
    `steps` (grpo.max_steps) over each stage's own when set."""
    if isinstance(value, Mapping):  # grpo.stages
        return "{" + ", ".join(f"{k} {steps or (s or {}).get('max_steps')}" for k, s in value.items()) + "}"
    return str(value)


def _env_name(params: Mapping) -> str:
    from wander.core.registry import DEFAULT_ENV

    env = params.get("env")
    return (env.get("name") if isinstance(env, Mapping) else None) or DEFAULT_ENV


def _shown(path: Path) -> str:
    """`path` relative to the working directory when under it (envs/<name>/recipe.yaml), else whole."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
