"""Content fingerprints: a short hash of a config as canonical JSON, and the SHA-256 of a file's or folder's bytes.

What keys resumable work (the stages' checkpoints and journals, tasks/runtime/fingerprint.py; an evaluation's
journal, wander/eval/journal.py): content, not paths or timestamps, so a rebuilt but identical input keeps its
fingerprint and any changed byte changes it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

CHUNK = 1 << 20


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
