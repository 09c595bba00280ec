"""Nested mappings as one level of joined keys: params as dotted keys (`sft.learning_rate`), metrics as
MLflow names (`eval/win`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def flatten(data: Mapping, prefix: str = "", sep: str = "/") -> dict[str, Any]:
    """A nested mapping as one level, keys joined by `sep`; lists and other values kept as they are."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{sep}{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, name, sep))
        else:
            out[name] = value
    return out
