"""Fingerprints of a stage's inputs: a short hash of its params, of the content of the files it reads and, for
training stages, of the code it runs (the hashes of data and files are wander/core/digest.py's).

A stage keys its resumable work by one (the synthesis journal, the SFT and GRPO checkpoints), so that work is
only ever resumed by a run with the very same inputs. Content, not paths or timestamps: a rebuilt but identical
input keeps the fingerprint, any changed byte changes it. The code is the project's source files the stage runs
(`code_files`: its module and every project module it imports, lazily inside functions too, and its env's
package): checkpoints written by other code are never resumed, whatever else changed in the project.
"""

from __future__ import annotations

import ast
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from wander.core.digest import content_digest, digest

PROJECT = Path(__file__).resolve().parents[2]
# The project's own code: what a stage imports from elsewhere is pinned.
CODE_PACKAGES = ("wander", "tasks", "envs")

__all__ = ["code_digest", "code_files", "content_digest", "digest", "fingerprint", "stage_code"]


def fingerprint(params: object, *inputs: str | os.PathLike, code: str | None = None) -> str:
    """The fingerprint of a run: its params (a config, or a tuple of them), the content of its input files and,
    when given, the `code_digest` of what it runs."""
    parts = {"params": params, "inputs": [content_digest(p) for p in inputs]}
    if code is not None:  # absent, the key is too: fingerprints taken without code (the journal's) stay valid
        parts["code"] = code
    return digest(parts)


def code_digest(modules: Iterable[str], root: str | os.PathLike = PROJECT) -> str:
    """SHA-256 of the project's source files that `modules` run (`code_files`): names and bytes."""
    root = Path(root)
    h = hashlib.sha256()
    for file in code_files(modules, root):
        data = file.read_bytes()
        h.update(f"{file.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def code_files(modules: Iterable[str], root: str | os.PathLike = PROJECT) -> list[Path]:
    """The source files of `modules` (dotted names) under `root` and of every project module they import, at any
    depth, packages' `__init__.py` included, in sorted order; names outside the project are skipped."""
    root = Path(root)
    todo = [m for name in modules for m in _with_parents(name)]
    seen: dict[str, Path] = {}
    while todo:
        name = todo.pop()
        if name in seen or name.split(".")[0] not in CODE_PACKAGES:
            continue
        file = _source(name, root)
        if file is None:
            continue
        seen[name] = file
        package = name if file.name == "__init__.py" else name.rpartition(".")[0]
        for imported in _imports(file, package):
            todo.extend(_with_parents(imported))
    return sorted(set(seen.values()))


def _source(name: str, root: Path) -> Path | None:
    path = root.joinpath(*name.split("."))
    for file in (path.with_suffix(".py"), path / "__init__.py"):
        if file.is_file():
            return file
    return None


def _with_parents(name: str) -> list[str]:
    # Importing a.b.c runs a/__init__.py and a/b/__init__.py first.
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _imports(file: Path, package: str) -> list[str]:
    # Every import statement, wherever it is (the stages import their heavy libraries inside functions); for
    # `from x import y`, y may be a module of x: both are tried, a name that is no module is skipped.
    found = []
    for node in ast.walk(ast.parse(file.read_bytes(), filename=str(file))):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.append(base)
            found.extend(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return [name for name in found if name]


def stage_code(module: str, env: str | None = None) -> str:
    """The `code_digest` of a stage: its module (`tasks.sft`) and, when `env` is one of the project's environments,
    that environment's package, with everything they import from the project."""
    modules = [module]
    if env is not None:
        from wander.core.registry import module_name

        modules.append(module_name(env))
    return code_digest(modules)
