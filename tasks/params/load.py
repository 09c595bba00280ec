"""params.yaml read, merged with a profile and checked against the params model (tasks/params/sections.py).

- `layout`: where every stage reads and writes; the same in every profile, so dvc.yaml can name outputs as
  `${layout.datasets}` and a smoke run writes where a full run does.
- `env`: the environment every stage plays (`name` plus the env's own config fields).
- one section per stage (`build_model`, `generate`, ...).

Profiles: `params.<profile>.yaml` holds overrides only; `load_params(profile=...)` (every stage's `--profile`)
deep-merges it onto params.yaml, and `python -m tasks.params.load --profile smoke --write params.yaml` writes the merged
file (what tests do in a scratch copy of the repo, so DVC sees the profile's values as params).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib
import sys
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass as checked

from tasks.params.recipe import apply_recipe
from tasks.params.section_base import FORBID
from tasks.params.sections import READS, Params
from tasks.params.yaml_file import ParamsError, edit_yaml, read_yaml, yaml_text

PARAMS_FILE = "params.yaml"
# Env settings a stage sets from its own section, never from `env`.
PIPELINE_OWNED = {"num_train": "generate", "num_eval": "generate", "num_test": "generate", "seed": "generate"}
PIPELINE_OWNED["specs_dir"] = "layout.datasets"


def read_params(path: str | Path = PARAMS_FILE, profile: str | None = None) -> dict:
    """The params file as a dict, with `params.<profile>.yaml` deep-merged onto it when a profile is given."""
    path = Path(path)
    params = read_yaml(path)
    for overrides_path in profile_files(path, profile) if profile else []:
        overrides = read_yaml(overrides_path)
        overrides.pop(EXTENDS, None)
        if "layout" in overrides:
            raise ParamsError(
                f"{overrides_path}: a profile may not change 'layout' (paths are the same in every profile); "
                "override budgets only"
            )
        params = merge(params, overrides, str(overrides_path))
    return params


EXTENDS = (
    "extends"  # a profile's top-level key naming the profile it is merged after (params.llm-smoke.yaml: llm)
)


def profile_files(path: Path, profile: str) -> list[Path]:
    """The override files of `profile` in merge order: those of the profile it `extends` first, then its own."""
    chain: list[Path] = []
    while profile:
        overrides_path = path.with_name(f"params.{profile}.yaml")
        if not overrides_path.exists():
            found = sorted(p.name for p in path.parent.glob("params.*.yaml"))
            raise ParamsError(
                f"no profile {profile!r}: {overrides_path} does not exist; profiles here: {found}"
            )
        if overrides_path in chain:
            raise ParamsError(
                f"{overrides_path}: profiles extend each other in a loop ({EXTENDS}: {profile})"
            )
        chain.insert(0, overrides_path)
        profile = read_yaml(overrides_path).get(EXTENDS)
        if profile is not None and not isinstance(profile, str):
            raise ParamsError(f"{overrides_path}: '{EXTENDS}' names one profile, got {profile!r}")
    return chain


def merge(base: Mapping, overrides: Mapping, source: str = "overrides", where: str = "") -> dict:
    """`base` with `overrides` deep-merged: mappings merge key by key, anything else replaces."""
    out = dict(base)
    for key, value in overrides.items():
        name = f"{where}.{key}" if where else str(key)
        if key not in base:
            # A typo in a profile would otherwise add a key nobody reads.
            raise ParamsError(f"{source}: overrides {name!r}, which the base params file does not have")
        if isinstance(value, Mapping) and isinstance(base[key], Mapping):
            out[key] = merge(base[key], value, source, name)
        else:
            out[key] = value
    return out


def load_params(
    path: str | Path = PARAMS_FILE, profile: str | None = None, params: Mapping | None = None
) -> Params:
    """The params (read from `path` with `profile`, unless given as a dict) as a checked `Params`, the keys left
    null for the env's recipe filled from it (tasks/params/recipe.py)."""
    source = str(path)
    raw = apply_recipe(read_params(path, profile) if params is None else params)
    try:
        model = Params.model_validate(raw)
    except ValidationError as e:
        raise ParamsError(describe(e, Params, source)) from None
    check_env(model, source)
    return model


def check_env(params: Params, source: str = PARAMS_FILE) -> None:
    """Check every env block (`env.<name>`, and GRPO's per-env blocks over it) against that env's config dataclass."""
    blocks = dict(params.env.model_extra or {})
    for name, settings in blocks.items():
        owned = sorted(set(settings) & set(PIPELINE_OWNED))
        if owned:
            where = ", ".join(f"{k} from {PIPELINE_OWNED[k]}" for k in owned)
            raise ParamsError(
                f"{source}: section 'env.{name}': {owned} are set by the pipeline ({where}); remove them"
            )
        config = _env_config(name, settings, source, f"env.{name}")
        if config is not None:
            blocks[name] = {k: getattr(config, k) for k in settings}  # as the env reads them
    params.env.__pydantic_extra__ = blocks
    # GRPO's blocks change the env's block for training: checked merged over it, as the stage builds them. The
    # section's are per env; the curriculum's stages are the played env's own.
    grpo, name = params.grpo, params.env.name
    for key, settings in grpo.env.items():
        unknown = params.env.unknown_block(key)
        if unknown:
            raise ParamsError(f"{source}: section 'grpo.env': {unknown}")
        _env_config(key, {**blocks.get(key, {}), **settings}, source, f"grpo.env.{key}")
    training = {**blocks.get(name, {}), **grpo.env.get(name, {})}
    for key, stage in (grpo.stages or {}).items():
        _env_config(name, {**training, **stage.env}, source, f"grpo.stages.{key}.env")


def _env_config(name: str, settings: dict[str, Any], source: str, section: str) -> Any:
    """The env's config built from `settings` (None when the env has no config dataclass); ParamsError if bad."""
    config_cls = env_config_class(name)
    if config_cls is None:
        return None  # an env without a config dataclass checks its own kwargs
    try:
        return TypeAdapter(checked(config_cls, config=FORBID)).validate_python(settings)
    except ValidationError as e:
        raise ParamsError(describe(e, config_cls, source, section=section)) from None


def env_config_class(name: str) -> type | None:
    """The config dataclass of a registered env by convention (`envs.<name>.<name>_config`), if any."""
    from wander.core.registry import module_name

    module_path = module_name(name)
    try:
        module = importlib.import_module(f"{module_path}.{module_path.rsplit('.', 1)[-1]}_config")
    except ImportError:
        return None
    classes = [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__
    ]
    return classes[0] if len(classes) == 1 else None


class _Unread:
    """A section the stage did not declare: reading it fails, so READS (and dvc.yaml) cannot fall behind."""

    def __init__(self, stage: str, section: str):
        self._where = (stage, section)

    def __getattr__(self, key: str) -> Any:
        stage, section = object.__getattribute__(self, "_where")
        raise AttributeError(
            f"stage {stage!r} reads params section {section!r} but does not declare it: add it to "
            f"tasks.params.sections.READS[{stage!r}] and to the stage's params in dvc.yaml"
        )


def restrict(params: Params, stage: str) -> Params:
    """The params a stage may read: `layout` and its READS sections; any other section raises on use."""
    keep = {"layout", *READS[stage]}
    return params.model_copy(update={s: _Unread(stage, s) for s in Params.model_fields if s not in keep})


# ----- error messages -----


def describe(error: ValidationError, root: type, source: str, section: str | None = None) -> str:
    """Each error as `<file>: section '<s>': <what is wrong with which key>`, one line per error."""
    lines = []
    for e in error.errors(include_url=False):
        loc = ((section,) if section else ()) + tuple(e["loc"])
        if len(loc) == 1 and e["type"] == "extra_forbidden":
            lines.append(
                f"{source}: unknown section {loc[0]!r}{_did_you_mean(loc[0], _fields(root), 'sections')}"
            )
        else:
            lines.append(f"{source}: section {loc[0]!r}: {_what(e, root, loc, bool(section))}")
    return "\n".join(dict.fromkeys(lines))


def _what(e: dict, root: type, loc: tuple, prefixed: bool) -> str:
    key = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[1:]).lstrip(".")
    value = e.get("input")
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    got = f"got {type(value).__name__} {shown}"
    path = loc[1:] if prefixed else loc  # the root type of an env config starts below the section
    if e["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        known = set(_fields(_type_at(root, path[:-1]))) - (set(PIPELINE_OWNED) if prefixed else set())
        return f"unknown key {key!r}{_did_you_mean(loc[-1], known)}"
    if e["type"].endswith(("_type", "_parsing", "literal_error", "int_from_float")):
        return f"key {key!r} expects {type_name(_type_at(root, path))}, {got}"
    message = e["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if e["type"] in ("value_error", "assertion_error"):
        return f"key {key!r}: {message}" if key else message
    return f"key {key!r}: {message[:1].lower()}{message[1:]}, {got}"


def _did_you_mean(name: object, known: Iterable[str], what: str = "keys") -> str:
    close = difflib.get_close_matches(str(name), sorted(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{hint}; known {what}: {', '.join(sorted(known))}"


def _fields(tp: Any) -> dict[str, Any]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return {name: info.annotation for name, info in tp.model_fields.items()}
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return {f.name: hints[f.name] for f in dataclasses.fields(tp) if f.init}
    return {}


def _type_at(tp: Any, path: tuple) -> Any:
    """The declared type at a location inside `tp` (Any when unknown)."""
    for part in path:
        tp = _optional_inner(tp)
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is dict:
            tp = args[1]
        elif origin in (list, tuple) and isinstance(part, int):
            tp = args[0] if origin is list or args[-1] is Ellipsis else args[min(part, len(args) - 1)]
        else:
            tp = _fields(tp).get(part, Any)
    return tp


def _optional_inner(tp: Any) -> Any:
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        return next(a for a in args if a is not type(None))
    return tp


def type_name(hint: Any) -> str:
    """A type as a person reads it: `int`, `float or None`, `list[str]`, `one of 'a', 'b'`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("None" if a is type(None) else type_name(a) for a in args)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (list, tuple, dict):
        return f"{origin.__name__}[{', '.join('...' if a is Ellipsis else type_name(a) for a in args)}]"
    if _fields(hint):
        return f"a mapping of {hint.__name__} keys"
    return getattr(hint, "__name__", str(hint))


def add_params_arguments(parser: argparse.ArgumentParser) -> None:
    """The `--params` and `--profile` options every command that reads params.yaml takes."""
    parser.add_argument("--params", default=PARAMS_FILE, help="params file (default: params.yaml)")
    parser.add_argument("--profile", help="merge params.<profile>.yaml onto the params, e.g. smoke")


def write_params(path: str | Path, profile: str | None, out: str | Path) -> list[str]:
    """Write the params of `path` with `profile` merged to `out`, checked, the way `dvc exp run -S` edits a params
    file: `path`'s text, comments and order kept, only the values that change rewritten. Returns their keys."""
    merged = read_params(path, profile)
    load_params(path, params=merged)
    return edit_yaml(path, merged, out)


def main(argv: list[str] | None = None) -> int:
    """`python -m tasks.params.load`: check a params file (with a profile), print or write the merged result."""
    parser = argparse.ArgumentParser(prog="python -m tasks.params.load", description=__doc__.splitlines()[0])
    add_params_arguments(parser)
    parser.add_argument(
        "--write", metavar="PATH", help="write the merged, checked params here (the file's comments kept)"
    )
    args = parser.parse_args(argv)
    try:
        params = read_params(args.params, args.profile)
        load_params(args.params, params=params)
        if args.write:
            changed = write_params(args.params, args.profile, args.write)
            origin = f"{args.params} + profile {args.profile}" if args.profile else args.params
            print(f"wrote {args.write}: {origin}, {len(changed)} values changed")
            return 0
    except ParamsError as e:
        print(f"params: error: {e}", file=sys.stderr)
        return 2
    print(yaml_text(params), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
