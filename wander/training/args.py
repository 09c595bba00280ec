"""Trainer-config helpers shared by the trainer builders; a leaf module, so any of them may import it."""

from __future__ import annotations

import copy
from typing import Any


def replace_args(args: Any, **changes: Any) -> Any:
    """A shallow copy of a trainer config with some fields changed: the caller's config is left as it was."""
    args = copy.copy(args)
    for name, value in changes.items():
        setattr(args, name, value)
    return args
