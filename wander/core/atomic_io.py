"""Atomic outputs: every file or folder a stage writes appears whole or not at all (temp, then rename).

A writer killed mid-write (SIGKILL, the OOM killer, a power cut) leaves its temporary next to the output: a
`.X.tmp-*` file or folder (being written) or a `.X.old-*` folder (the previous output, being swapped out). Every
writer first clears what an earlier, dead writer of the same output left (`clean_leftovers`), so model-sized
leftovers never pile up, and a swap cut between its two renames gets its previous output back.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from wander.core.process_tree import alive

TEMP_NAME = re.compile(r"\.(?P<target>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)-(?P<token>[0-9a-f]{8})")
"""A writer's temporary name (`fullmatch` it): the target's name, `tmp` (being written) or `old` (a folder being
swapped out), the writing process id, a random token. The only debris a crash can leave next to an output."""
_in_flight: set[str] = set()  # temporaries this process is writing now: never leftovers
_in_flight_lock = threading.Lock()


def _tmp_name(path: Path, kind: str) -> Path:
    # A fresh name per writer, next to the target so the rename stays on one filesystem; TEMP_NAME matches it.
    tmp = path.with_name(f".{path.name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}")
    with _in_flight_lock:
        _in_flight.add(str(tmp))
    return tmp


def _done(tmp: Path) -> None:
    with _in_flight_lock:
        _in_flight.discard(str(tmp))


def clean_leftovers(path: str | os.PathLike) -> list[Path]:
    """Remove the temporaries that dead writers of `path` left next to it, putting the newest swapped-out output
    back first where `path` itself is missing (a swap cut between its renames); return what was removed."""
    path = Path(path)
    if not path.parent.is_dir():
        return []
    found = []
    for entry in path.parent.iterdir():
        match = TEMP_NAME.fullmatch(entry.name)
        if match is None or match["target"] != path.name:
            continue
        pid = int(match["pid"])
        with _in_flight_lock:
            ours = str(entry) in _in_flight
        # A live writer in another process may still be at work; a dead one's (or this pid's, reused) is debris.
        if ours or (pid != os.getpid() and alive(pid)):
            continue
        found.append((match["kind"], entry))
    olds = sorted((e for kind, e in found if kind == "old"), key=lambda e: e.stat().st_mtime_ns)
    if olds and not os.path.lexists(path):
        olds.pop().rename(path)  # the last whole output, the one readers saw before the swap began
    removed = [e for kind, e in found if kind == "tmp"] + olds
    for entry in removed:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    return removed


def write_atomic(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call `write(tmp)` on a temporary file next to `path`, then rename it over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(path)
    tmp = _tmp_name(path, "tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        _done(tmp)
    return path


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write a text file atomically."""
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json(path: str | os.PathLike, data: object) -> Path:
    """Write a JSON file atomically (indented, keys in insertion order)."""
    return write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> Path:
    """Write one JSON object per line, atomically."""

    def write(tmp: Path) -> None:
        with tmp.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")

    return write_atomic(path, write)


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Every line of a JSONL file as a dict; a bad line fails naming the file and line number."""
    rows = []
    with Path(path).open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{number}: not a JSON line: {e}") from e
    return rows


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary folder; on success it replaces `path` whole, on error it is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(path)
    tmp = _tmp_name(path, "tmp")
    try:
        tmp.mkdir()
        yield tmp
        replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        _done(tmp)


def replace_dir(src: Path, dst: Path) -> None:
    """Move folder `src` to `dst`; an existing `dst` is swapped out first, so readers never see a mix."""
    if not dst.exists():
        src.rename(dst)
        return
    old = _tmp_name(dst, "old")
    try:
        dst.rename(old)
        try:
            src.rename(dst)
        except BaseException:
            old.rename(dst)  # put the previous output back rather than leave nothing
            raise
        shutil.rmtree(old, ignore_errors=True)
    finally:
        _done(old)
