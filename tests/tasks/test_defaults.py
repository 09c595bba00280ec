"""Each default is defined once: the library's configs hold theirs, the params model refers to them, and params.yaml
equals the model's defaults but at the keys the pipeline tunes (listed here, each explained in its docs)."""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import inspect
import operator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tasks.params.load import env_config_class, load_params, read_params
from tasks.params.recipe import apply_recipe
from tasks.params.sections import Params
from wander.core.registry import module_name
from wander.eval.config import EvaluateConfig
from wander.training.curriculum_config import CurriculumStage
from wander.training.rollout_config import RolloutConfig

REPO = Path(__file__).resolve().parents[2]

# params.yaml values that differ on purpose from the params model's default, which is the library's: the pipeline's
# tuned values. Each is a setting of a library object, explained in its field's (or section's) docs; a new one is a
# conscious edit here.
TUNED = {
    "env.tictactoe.midgame_starts",
    "env.reverse_text.num_groups",
    "env.double_check.num_groups",
    "env.calculator.num_groups",
    "env.workplace_assistant.num_groups",
    "synthesize.teacher.max_concurrency",
    "grpo.batch_size",
    "grpo.tool_protocol",
    "grpo.env",
}

# Section keys that set one field of a library config; whole library configs (a key whose value is one, a section
# that is one) are found by type.
BACKED = {
    "grpo.batch_size": (CurriculumStage, "batch_size"),
    "grpo.tool_protocol": (RolloutConfig, "tool_protocol"),
    "grpo.explore": (RolloutConfig, "explore"),
    "register.max_new_tokens": (EvaluateConfig, "max_new_tokens"),
    "register.eval_dir": (EvaluateConfig, "out_dir"),
}


@pytest.fixture
def params() -> dict:
    return read_params(REPO / "params.yaml")


def library_default(cls: type, name: str) -> Any:
    """The default of field `name` of a library config class (a dataclass or a pydantic model)."""
    if issubclass(cls, BaseModel):
        return cls.model_fields[name].get_default(call_default_factory=True)
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    return field.default if field.default_factory is dataclasses.MISSING else field.default_factory()


def library_class(cls: type) -> type:
    """The library's own dataclass behind a checked (pydantic) copy of it."""
    return next(
        c for c in cls.__mro__ if dataclasses.is_dataclass(c) and "__pydantic_validator__" not in vars(c)
    )


def library_bases(section: type) -> list[type]:
    """The library config models a section class is (e.g. `EvaluateConfig` for `evaluate`)."""
    return [c for c in section.__mro__[1:] if issubclass(c, BaseModel) and c.__module__.startswith("wander.")]


def env_defaults(name: str) -> dict[str, Any]:
    """An environment's own settings: its config dataclass's defaults, else its factory's keyword defaults."""
    config = env_config_class(name)
    if config is not None:
        return {f.name: library_default(config, f.name) for f in dataclasses.fields(config)}
    factory = importlib.import_module(module_name(name)).load_environment
    return {
        p.name: p.default
        for p in inspect.signature(factory).parameters.values()
        if p.default is not inspect.Parameter.empty
    }


def plain(value: Any) -> Any:
    """A value as YAML holds it (tuples as lists), to compare across sources."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def leaves(data: Any, path: str = "") -> dict[str, Any]:
    """Every value of a nested mapping by its dotted key (an empty mapping counts as one value)."""
    if not isinstance(data, dict) or not data:
        return {path: data}
    return {
        k: v for key, value in data.items() for k, v in leaves(value, f"{path}.{key}".lstrip(".")).items()
    }


def model_default(key: str) -> Any:
    """The default of a dotted params key: the model's, or for a setting in an env block the env's own."""
    parts = key.split(".")
    if parts[0] == "env" and len(parts) == 3:
        return env_defaults(parts[1])[parts[2]]
    return functools.reduce(operator.getitem, parts, Params().model_dump())


def is_library_setting(key: str) -> bool:
    """Whether a dotted params key sets a field of a library config (only those may be tuned)."""
    section, field = key.split(".")[:2]
    value = getattr(Params(), section)
    whole = field in type(value).model_fields and dataclasses.is_dataclass(getattr(value, field))
    inherited = any(field in base.model_fields for base in library_bases(type(value)))
    env_block = section == "env" or key == "grpo.env"  # an env's settings, its own by default
    return key in BACKED or whole or inherited or env_block


def test_library_settings_default_to_the_librarys() -> None:
    defaults = Params()
    for key, (cls, name) in BACKED.items():
        section, field = key.split(".")
        assert getattr(getattr(defaults, section), field) == library_default(cls, name), key
    found = set()
    for section_name in Params.model_fields:
        section = getattr(defaults, section_name)
        for field in type(section).model_fields:
            value = getattr(section, field)
            if dataclasses.is_dataclass(value):  # a library config as a key: every field its default
                own = dataclasses.asdict(library_class(type(value))())
                assert dataclasses.asdict(value) == own, f"{section_name}.{field}"
                found.add(f"{section_name}.{field}")
        for base in library_bases(type(section)):  # a section that is a library config: the same defaults
            for field in base.model_fields:
                if field in type(section).__annotations__:  # the section redefines it: the pipeline's own key
                    continue
                assert getattr(section, field) == library_default(base, field), f"{section_name}.{field}"
            found.add(section_name)
    assert {"build_model.scratch", "synthesize.teacher", "synthesize.vllm", "evaluate"} <= found
    # An env's settings are its own unless params.yaml sets them.
    assert defaults.env.settings() == {} and defaults.grpo.env == {}


def test_params_yaml_is_the_model_defaults_but_for_the_tuned_keys(params: dict) -> None:
    untuned = copy.deepcopy(params)
    for key in sorted(TUNED):
        *path, leaf = key.split(".")
        block = functools.reduce(operator.getitem, path, untuned)
        assert leaf in block, f"TUNED lists {key}, which params.yaml does not set: remove it from TUNED"
        assert plain(block[leaf]) != plain(model_default(key)), (
            f"params.yaml sets {key} to its default: remove it from TUNED"
        )
        assert is_library_setting(key), (
            f"{key} is the pipeline's own: change its default in its section (tasks/params/) instead"
        )
        del block[leaf]  # the default takes its place
    # The recipe keys are null in both; load_params fills them from the default env's recipe in both.
    loaded, defaults = load_params(params=untuned), load_params(params={})
    for section in Params.model_fields:
        if section == "env":
            continue
        ours, theirs = (
            leaves(plain(getattr(loaded, section).model_dump())),
            leaves(plain(getattr(defaults, section).model_dump())),
        )
        drift = {
            k: (ours.get(k), theirs.get(k))
            for k in ours.keys() | theirs.keys()
            if ours.get(k) != theirs.get(k)
        }
        assert not drift, (
            f"params.yaml differs from the params model's defaults (params.yaml, model) at {section}: {drift}; "
            "make them equal, or list the key in TUNED and say why in its docs"
        )
    assert (loaded.env.name, loaded.env.url) == (defaults.env.name, defaults.env.url)
    for name, settings in (loaded.env.model_extra or {}).items():
        own = env_defaults(name)
        assert set(settings) <= set(own), (
            f"env.{name} sets {sorted(set(settings) - set(own))}, not env settings"
        )
        drift = {k: (v, own[k]) for k, v in settings.items() if plain(v) != plain(own[k])}
        assert not drift, (
            f"params.yaml env.{name} differs from the env's own settings (params.yaml, env): {drift}"
        )


def test_every_tuned_key_says_why_in_its_docs() -> None:
    for key in sorted(TUNED):
        section, field = key.split(".")[:2]
        model = type(getattr(Params(), section))
        info = model.model_fields.get(field)
        docs = f"{info.description if info else ''} {model.__doc__}"
        assert "params.yaml" in docs and key.split(".")[-1] in docs, (
            f"the docs of {key} do not say what params.yaml sets"
        )


def test_params_yaml_lists_every_key(params: dict) -> None:
    # DVC sees only the file: a key missing there would change a run unseen when its default changes.
    for section, model in Params.model_fields.items():
        expected = set(model.annotation.model_fields)
        assert expected <= set(params[section]), (
            f"params.yaml {section} lacks {sorted(expected - set(params[section]))}"
        )
    # An empty file is valid: every default, the recipe keys from the default env's recipe.
    assert load_params(params={}) == Params.model_validate(apply_recipe({}))
