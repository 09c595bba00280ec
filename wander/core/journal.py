"""An append-only JSONL journal of finished work, keyed by a field of each record (synthesis: the episode seed;
evaluation: a unit's fingerprint, wander/eval/journal.py), that survives a SIGKILL at any moment.

Each append writes whole lines and fsyncs before returning, so a record the caller saw appended is on disk. A kill
during an append can leave a torn last line; `load` cuts it off (that episode is simply played again). A record
is never written twice: callers skip keys that `load` returned.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path

logger = logging.getLogger(__name__)


class Journal:
    """Finished records on disk, one JSON object per line, each with a `key` field."""

    def __init__(self, path: str | os.PathLike, key: str = "seed") -> None:
        self.path = Path(path)
        self.key = key

    def load(self) -> dict:
        """Every complete record by key (first one wins); a torn last line is cut off the file."""
        if not self.path.exists():
            return {}
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            logger.warning(
                "%s: dropping a torn last line (%d bytes) left by a killed run", self.path, len(data) - end
            )
            with self.path.open("r+b") as f:
                f.truncate(end)
                f.flush()
                os.fsync(f.fileno())
        records: dict = {}
        for number, line in enumerate(data[:end].splitlines(), 1):
            try:
                record = json.loads(line)
                key = record[self.key]
            except (ValueError, KeyError, TypeError):
                # Cannot happen with whole-line appends; if the disk says otherwise, replay that record.
                logger.warning("%s:%d: unreadable record skipped; it will be redone", self.path, number)
                continue
            records.setdefault(key, record)
        return records

    def append(self, records: Iterable[dict]) -> int:
        """Append records as whole lines and fsync; return how many."""
        lines = [json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records]
        if not lines:
            return 0
        new = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write("".join(lines))
            f.flush()
            os.fsync(f.fileno())
        if new:
            _fsync_dir(self.path.parent)  # the file's directory entry must survive a crash too
        return len(lines)

    def remove(self) -> None:
        """Delete the journal (its records are in the final output)."""
        self.path.unlink(missing_ok=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
