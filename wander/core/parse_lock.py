"""`ast.parse` under one lock on the CPython releases whose AST constructor shares its depth counter between threads.

CPython 3.11.0-3.11.7 keep the AST constructor's recursion depth in interpreter-wide state (gh-106905, fixed in
3.11.8): when a garbage collection inside one thread's `ast.parse` runs Python code and another thread parses
meanwhile, the first fails with `SystemError: AST constructor recursion depth mismatch`. It happens in a Prefect
flow run: Prefect's threads build pydantic schemas (`inspect.signature` parses) while the flow's thread imports
the params models (pydantic's `use_attribute_docstrings` parses each class's source). One lock, one parse at a
time; reentrant, since a finalizer the collection runs may parse on the same thread.
"""

from __future__ import annotations

import ast
import functools
import os
import sys
import threading
from typing import Any

# The releases with the shared counter (the project runs on 3.11: pyproject's requires-python).
AFFECTED = (3, 11) <= sys.version_info[:3] < (3, 11, 8)
_LOCK = threading.RLock()


def _new_lock() -> None:
    global _LOCK
    _LOCK = threading.RLock()


# A child forked while another thread parsed would inherit the lock held, by a thread it does not have.
os.register_at_fork(after_in_child=_new_lock)


def serialize_ast_parse() -> None:
    """Make `ast.parse` take a process-wide lock where this interpreter needs it; once per process."""
    if not AFFECTED or getattr(ast.parse, "__wander_serialized__", False):
        return
    parse = ast.parse

    @functools.wraps(parse)
    def serialized(*args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return parse(*args, **kwargs)

    serialized.__wander_serialized__ = True  # type: ignore[attr-defined]
    ast.parse = serialized
