"""YAML mapping files as dicts, read the way DVC reads them: params.yaml, a profile, an env's recipe, DVC's lock
file; and a dict as YAML text (a derived params file, the merged params printed).

The one module of the pipeline that imports a YAML library (tests/test_knowledge_rooms.py): every params file is read
and written through here, so every reader sees the same values.
"""

from __future__ import annotations

import decimal
import io
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml


class ParamsError(ValueError):
    """A params file that does not match the model: names the file, section, key and expected type."""


class _Loader(yaml.SafeLoader):
    """YAML 1.1 reads `5e-5` as a string; read it as the float YAML 1.2 (and DVC) sees."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$"), list("-+0123456789.")
)


def read_yaml(path: Path) -> dict:
    """A YAML mapping file (params, a profile, a recipe, dvc.lock) as a dict; ParamsError naming the file if it is not."""
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


def yaml_text(data: dict) -> str:
    """`data` as block-style YAML in its own key order, which `read_yaml` reads back to the same dict."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


def edit_yaml(path: str | Path, values: Mapping, out: str | Path) -> list[str]:
    """Write `path` with `values` assigned to `out` (atomically), the way `dvc exp run -S` edits a params file: its
    text, comments and order kept, only the values that change rewritten. Returns the dotted keys of those."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    from wander.core.atomic_io import write_text

    editor = YAML()  # round trip: comments, key order and flow style survive
    editor.width = 4096
    # As params.yaml spells them: `null`, and decimals (`1e-05` is a string to YAML 1.1 readers such as PyYAML).
    editor.representer.add_representer(
        type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null")
    )
    editor.representer.add_representer(float, _represent_float)
    doc = editor.load(Path(path).read_text(encoding="utf-8"))
    changed: list[str] = []

    def assign(node: Any, values: Mapping, where: str) -> None:
        for key, value in values.items():
            name = f"{where}.{key}" if where else str(key)
            old = node.get(key)
            if isinstance(value, Mapping) and isinstance(old, Mapping):
                assign(old, value, name)
            elif old != value:
                # A list written in flow style stays so; a list or mapping that replaces a scalar (a profile's
                # curriculum over `stages: null`) goes on the key's line: every other line keeps its place.
                flow = getattr(getattr(old, "fa", None), "flow_style", False) or not isinstance(
                    old, list | Mapping
                )
                if isinstance(value, list | Mapping) and flow:
                    value = CommentedMap(value) if isinstance(value, Mapping) else CommentedSeq(value)
                    value.fa.set_flow_style()
                node[key] = value
                changed.append(name)

    assign(doc, values, "")
    text = io.StringIO()
    editor.dump(doc, text)
    write_text(Path(out), text.getvalue())
    return changed


def _represent_float(representer: Any, value: float) -> Any:
    if not math.isfinite(value) or "e" not in repr(value):
        return representer.represent_float(value)
    return representer.represent_scalar("tag:yaml.org,2002:float", format(decimal.Decimal(repr(value)), "f"))
