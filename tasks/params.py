"""Typed params: one section of params.yaml into a stage's config dataclass, every key checked.

params.yaml is the single file DVC tracks. It holds:

- `layout`: where every stage reads and writes. The same in every profile (a profile may not touch it), so
  dvc.yaml can name outputs as `${layout.datasets}` and a smoke run writes where a full run does.
- `env`: the environment every stage plays (`name` plus the env's own settings, e.g. `TicTacToeConfig` fields).
- one section per stage (`build_model`, `generate`, ...), loaded into that stage's config dataclass
  (`tasks/<stage>_config.py`).

A config field may take its default from a shared section: `field(metadata={"from": "layout.datasets"})` reads
`layout.datasets` unless the stage's own section sets the key. Nested dataclass fields (e.g.
`build_model.scratch`) are checked the same way, key by key.

Profiles: `params.<profile>.yaml` next to params.yaml holds overrides only (tiny budgets for `smoke`). They are
deep-merged onto params.yaml by `read_params(profile=...)` (the `--profile` option of every stage) or written out
as a complete params file by `python -m tasks.params --profile smoke --write params.yaml` (what tests do in a
scratch copy of the repo, so DVC sees the profile's values as params).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib
import sys
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

PARAMS_FILE = "params.yaml"
SHARED = ("layout", "env")
# Stage section -> its config class ("module:Class"), imported on use. New stages add a line here.
STAGES = {
    "build_model": "tasks.build_model_config:BuildModelConfig",
    "generate": "tasks.generate_config:GenerateConfig",
    "synthesize": "tasks.synthesize_config:SynthesizeConfig",
    "curate": "tasks.curate_config:CurateConfig",
    "sft": "tasks.sft_config:SFTStageConfig",
    "grpo": "tasks.grpo_config:GRPOStageConfig",
    "evaluate": "tasks.evaluate_config:EvaluateConfig",
    "register": "tasks.register_config:RegisterConfig",
}

T = TypeVar("T")


class ParamsError(ValueError):
    """A params file that does not match the config it feeds: names the file, section, key and expected type."""


@dataclass
class Layout:
    """Where the pipeline's files live, relative to the repo root; the same in every profile."""

    base_model: str = field(default="data/models/base", metadata={"help": "The base policy (build_model)."})
    datasets: str = field(default="data/datasets", metadata={"help": "Episode-spec splits (generate)."})
    episodes: str = field(default="data/synth", metadata={"help": "Teacher games (synthesize)."})
    sft: str = field(default="data/sft", metadata={"help": "The SFT dataset (curate)."})
    metrics: str = field(
        default="data/metrics", metadata={"help": "One metrics JSON per stage (DVC metrics)."}
    )
    models: str = field(
        default="data/models", metadata={"help": "Trained checkpoints: sft, grpo-<stage> (final models)."}
    )
    eval: str = field(default="data/eval", metadata={"help": "The evaluation matrix and report (evaluate)."})
    work: str = field(
        default="data/work",
        metadata={"help": "Resumable state kept across runs (synthesis journal); never a DVC output."},
    )


# ----- reading files -----


def read_params(path: str | Path = PARAMS_FILE, profile: str | None = None) -> dict:
    """The params file as a dict, with `params.<profile>.yaml` deep-merged onto it when a profile is given."""
    path = Path(path)
    params = _read_yaml(path)
    if profile:
        overrides_path = path.with_name(f"params.{profile}.yaml")
        if not overrides_path.exists():
            found = sorted(p.name for p in path.parent.glob("params.*.yaml"))
            raise ParamsError(
                f"no profile {profile!r}: {overrides_path} does not exist; profiles here: {found}"
            )
        overrides = _read_yaml(overrides_path)
        if "layout" in overrides:
            raise ParamsError(
                f"{overrides_path}: a profile may not change 'layout' (paths are the same in every profile); "
                "override budgets only"
            )
        params = merge(params, overrides, str(overrides_path))
    return params


def _read_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ParamsError(
            f"params file {path} not found (run from the repo root, or pass --params)"
        ) from None
    except yaml.YAMLError as e:
        raise ParamsError(f"{path} is not valid YAML: {e}") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ParamsError(f"{path} must be a mapping of sections, got {type(data).__name__}")
    return data


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


# ----- loading configs -----


def load_config(
    cls: type[T],
    section: str,
    params: Mapping | None = None,
    *,
    path: str | Path = PARAMS_FILE,
    profile: str | None = None,
) -> T:
    """Section `section` of the params (read from `path` unless given) as a checked `cls` instance."""
    source = str(path)
    if params is None:
        params = read_params(path, profile)
    if section not in params:
        raise ParamsError(f"{source}: no section {section!r}; sections: {sorted(params)}")
    values = params[section] or {}
    if not isinstance(values, Mapping):
        raise ParamsError(f"{source}: section {section!r} must be a mapping, got {type(values).__name__}")
    values = dict(values)
    for f in fields(cls):
        origin = f.metadata.get("from")
        if origin and f.name not in values:
            shared = shared_section(params, origin.split(".")[0], source)
            value = _lookup(shared, origin.split(".")[1:])
            if value is not None:  # absent from the shared section too: the field's default
                values[f.name] = value
    return build(cls, values, source, section)


def shared_section(params: Mapping, name: str, source: str = PARAMS_FILE) -> dict:
    """The `layout` or `env` section, checked (env keys against the env's own config dataclass)."""
    raw = params.get(name) or {}
    if not isinstance(raw, Mapping):
        raise ParamsError(f"{source}: section {name!r} must be a mapping, got {type(raw).__name__}")
    if name == "layout":
        return dataclasses.asdict(build(Layout, dict(raw), source, "layout"))
    if name == "env":
        return check_env(dict(raw), source)
    raise ParamsError(f"{source}: {name!r} is not a shared section; shared: {SHARED}")


def check_env(env: dict, source: str = PARAMS_FILE) -> dict:
    """The env section with its types checked: `name`, plus keys of the env's `<name>_config.py` dataclass."""
    name = env.get("name")
    if not isinstance(name, str) or not name:
        raise ParamsError(f"{source}: section 'env': key 'name' expects str (e.g. tictactoe), got {name!r}")
    settings = {k: v for k, v in env.items() if k != "name"}
    config_cls = env_config_class(name)
    if config_cls is None:
        return dict(env)  # an env without a config dataclass checks its own kwargs
    hints = typing.get_type_hints(config_cls)
    known = {f.name for f in fields(config_cls) if f.init}
    checked = {}
    for key, value in settings.items():
        if key not in known:
            raise ParamsError(_unknown_key(source, "env", key, known | {"name"}))
        checked[key] = coerce(value, hints[key], source, "env", key)
    try:
        config_cls(**checked)  # the env's own rules (ranges, choices) fail here, not mid-stage
    except (ValueError, TypeError) as e:
        raise ParamsError(f"{source}: section 'env': {e}") from e
    return {"name": name, **checked}


def env_config_class(name: str) -> type | None:
    """The config dataclass of a registered env by convention (`envs.<name>.<name>_config`), if any."""
    from envs.registry import BUILTIN

    module_name = BUILTIN.get(name, name)
    leaf = module_name.rsplit(".", 1)[-1]
    try:
        module = importlib.import_module(f"{module_name}.{leaf}_config")
    except ImportError:
        return None
    classes = [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type) and is_dataclass(obj) and obj.__module__ == module.__name__
    ]
    return classes[0] if len(classes) == 1 else None


def build(cls: type[T], values: Mapping, source: str, section: str, prefix: str = "") -> T:
    """A `cls` instance from `values`: unknown keys and wrong types fail, naming section, key and type."""
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls) if f.init}
    kwargs = {}
    for key, value in values.items():
        if key not in known:
            raise ParamsError(
                _unknown_key(source, section, f"{prefix}{key}", {f"{prefix}{k}" for k in known})
            )
        kwargs[key] = coerce(value, hints[key], source, section, f"{prefix}{key}")
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as e:
        where = f"{section}.{prefix.rstrip('.')}" if prefix else section
        raise ParamsError(f"{source}: section {where!r}: {e}") from e


def _unknown_key(source: str, section: str, key: str, known: set[str]) -> str:
    close = difflib.get_close_matches(key, sorted(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{source}: section {section!r}: unknown key {key!r}{hint}; known keys: {', '.join(sorted(known))}"


def coerce(value: Any, hint: Any, source: str, section: str, key: str) -> Any:
    """`value` checked against the type `hint` (ints widen to floats, lists to tuples), or a ParamsError."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    ok, out = True, value
    if hint is Any:
        pass
    elif origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in (a for a in args if a is not type(None)):
            try:
                return coerce(value, arg, source, section, key)
            except ParamsError:
                continue
        ok = False
    elif origin is Literal:
        ok = value in args
    elif hint is bool:
        ok = isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif hint is float:
        # YAML reads `1e-3` as a string; PyYAML's float needs a dot, so accept what float() reads.
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        out = float(value) if ok else value
    elif hint is str:
        ok = isinstance(value, str)
    elif origin is list:
        ok = isinstance(value, list)
        if ok:
            out = [coerce(v, args[0], source, section, f"{key}[{i}]") for i, v in enumerate(value)]
    elif origin is tuple:
        variadic = len(args) == 2 and args[1] is Ellipsis
        ok = isinstance(value, (list, tuple)) and (variadic or len(value) == len(args))
        if ok:
            item_types = [args[0]] * len(value) if variadic else list(args)
            out = tuple(
                coerce(v, t, source, section, f"{key}[{i}]")
                for i, (v, t) in enumerate(zip(value, item_types, strict=True))
            )
    elif origin is dict:
        ok = isinstance(value, dict)
        if ok:
            out = {
                coerce(k, args[0], source, section, f"{key}.{k}"): coerce(
                    v, args[1], source, section, f"{key}.{k}"
                )
                for k, v in value.items()
            }
    elif is_dataclass(hint):
        ok = isinstance(value, Mapping)
        if ok:
            return build(hint, value, source, section, prefix=f"{key}.")
    elif isinstance(hint, type):
        ok = isinstance(value, hint)
    if not ok:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise ParamsError(
            f"{source}: section {section!r}: key {key!r} expects {type_name(hint)}, "
            f"got {type(value).__name__} {shown}"
        )
    return out


def type_name(hint: Any) -> str:
    """A type as a person reads it: `int`, `float or None`, `list[str]`, `one of 'a', 'b'`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("None" if a is type(None) else type_name(a) for a in args)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (list, tuple, dict):
        inner = ", ".join("..." if a is Ellipsis else type_name(a) for a in args)
        return f"{origin.__name__}[{inner}]"
    if is_dataclass(hint):
        return f"a mapping of {hint.__name__} fields"
    return getattr(hint, "__name__", str(hint))


def _lookup(data: Mapping, keys: list[str]) -> Any:
    for key in keys:
        if not isinstance(data, Mapping) or key not in data:
            return None
        data = data[key]
    return data


# ----- the whole file -----


def stage_class(section: str) -> type:
    """The config class of a stage section (see STAGES)."""
    if section not in STAGES:
        raise ParamsError(f"no stage {section!r}; stages: {', '.join(STAGES)}")
    module, _, name = STAGES[section].partition(":")
    return getattr(importlib.import_module(module), name)


def check_params(params: Mapping, source: str = PARAMS_FILE) -> dict[str, Any]:
    """Every section checked: shared ones and each stage's config; unknown sections fail. Returns the configs."""
    unknown = sorted(set(params) - set(SHARED) - set(STAGES))
    if unknown:
        raise ParamsError(
            f"{source}: unknown section(s) {unknown}; known: {', '.join((*SHARED, *STAGES))} "
            "(a new stage registers its config in tasks.params.STAGES)"
        )
    configs: dict[str, Any] = {name: shared_section(params, name, source) for name in SHARED}
    for section in STAGES:
        if section in params:
            configs[section] = load_config(stage_class(section), section, params, path=source)
    return configs


def main(argv: list[str] | None = None) -> int:
    """`python -m tasks.params`: check a params file (with a profile), print or write the merged result."""
    parser = argparse.ArgumentParser(prog="python -m tasks.params", description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=PARAMS_FILE, help="params file (default: params.yaml)")
    parser.add_argument("--profile", default=None, help="merge params.<profile>.yaml onto it, e.g. smoke")
    parser.add_argument("--write", metavar="PATH", help="write the merged, checked params here")
    args = parser.parse_args(argv)
    try:
        params = read_params(args.params, args.profile)
        check_params(params, args.params)
    except ParamsError as e:
        print(f"params: error: {e}", file=sys.stderr)
        return 2
    text = yaml.safe_dump(params, sort_keys=False, default_flow_style=False)
    if args.write:
        from tasks.atomic import write_text

        origin = f"{args.params} + profile {args.profile}" if args.profile else args.params
        write_text(Path(args.write), f"# generated by `python -m tasks.params` from {origin}\n{text}")
        print(f"wrote {args.write}")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
