"""Fingerprints of a stage's inputs: a short hash of its params, of the content of the files it reads and, for
training stages, of the code it runs.

A stage keys its resumable work by one (the synthesis journal, the SFT and GRPO checkpoints), so that work is
only ever resumed by a run with the very same inputs. Content, not paths or timestamps: a rebuilt but identical
input keeps the fingerprint, any changed byte changes it. The code is the project's source files the stage runs
(`code_files`: its module and every project module it imports, lazily inside functions too, and its env's
package): checkpoints written by other code are never resumed, whatever else changed in the project.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

CHUNK = 1 << 20
PROJECT = Path(__file__).resolve().parents[2]
# The project's own code: what a stage imports from elsewhere is pinned.
CODE_PACKAGES = ("wander", "tasks", "envs")


def digest(data: object) -> str:
    """16 hex digits of the SHA-256 of `data` as canonical JSON (dataclasses and pydantic models as dicts)."""
    # Default separators: the synthesis journal's names, hashed this way before, stay valid.
    text = json.dumps(_plain(data), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def content_digest(path: str | os.PathLike) -> str:
    """SHA-256 of a file, or of a folder's files (relative paths and bytes, in sorted order); FileNotFoundError if absent."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"cannot fingerprint {path}: it does not exist")
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    h = hashlib.sha256()
    for file in files:
        name = "" if file == path else file.relative_to(path).as_posix()  # a rename inside a folder counts
        h.update(f"{name}\0{file.stat().st_size}\0".encode())  # lengths keep file boundaries unambiguous
        with file.open("rb") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
    return h.hexdigest()


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


def _plain(data: object) -> object:
    # The JSON shape of configs: a dataclass or pydantic model becomes its fields, tuples become lists.
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        return _plain(dataclasses.asdict(data))
    if hasattr(data, "model_dump"):
        return _plain(data.model_dump(mode="json"))
    if isinstance(data, dict):
        return {str(k): _plain(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_plain(v) for v in data]
    return data
