"""YAML mapping files as dicts, read the way DVC reads them: params.yaml, a profile, an env's recipe."""

from __future__ import annotations

import re
from pathlib import Path

import yaml


class ParamsError(ValueError):
    """A params file that does not match the model: names the file, section, key and expected type."""


class _Loader(yaml.SafeLoader):
    """YAML 1.1 reads `5e-5` as a string; read it as the float YAML 1.2 (and DVC) sees."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$"), list("-+0123456789.")
)


def read_yaml(path: Path) -> dict:
    """A YAML mapping file (params, a profile, an env's recipe) as a dict; ParamsError naming the file if it is not."""
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 (a SafeLoader)
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
