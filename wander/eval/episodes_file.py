"""Every game of an evaluation, one JSON line per episode with its cell, gzipped: what `wander ui` replays.

A line is the episode's `Episode.to_dict()` plus `policy`, `opponent` (the column group) and `side`, in the matrix's
order (policy rows, then column groups, then sides, then games), so a cell's games are the suite's frozen specs. With
samples (pass@k), a cell holds each sample's games in turn and a line also names its `sample`.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path

from wander.core.atomic_io import write_atomic
from wander.eval.matrix_result import MatrixResult


def episode_records(result: MatrixResult) -> Iterator[dict]:
    """Each played episode as a JSON-ready record naming its cell."""
    cells = [(group, side) for group in result.opponents for side in result.sides]
    for policy, episodes in result.episodes.items():
        for i, episode in enumerate(episodes):
            group, side = cells[i // result.per_cell]
            where = {"policy": policy, "opponent": group, "side": side}
            if result.samples > 1:  # one sample's lines stay as they were before samples existed
                where["sample"] = i % result.per_cell // result.games
            yield {**where, **episode.to_dict()}


def write_episodes(result: MatrixResult, path: str | os.PathLike) -> Path:
    """Write every episode of `result` to `path` (gzipped JSON lines), atomically."""

    def write(tmp: Path) -> None:
        # mtime=0 and no file name (the temporary one would differ each time): the same games give the same bytes,
        # so DVC sees an unchanged output as unchanged.
        with open(tmp, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as out:
            for record in episode_records(result):
                out.write((json.dumps(record, default=str) + "\n").encode("utf-8"))

    return write_atomic(path, write)


def read_episodes(path: str | os.PathLike) -> list[dict]:
    """The records `write_episodes` wrote; a missing file fails naming it and the stage that writes it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no evaluation episodes at {path}: run the evaluate stage (`make run`, or `wander eval --out DIR`)"
        )
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]
