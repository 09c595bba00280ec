"""The files an evaluation writes under its output folder, whatever its suite's kind (a game's opponent matrix,
`wander.eval.matrix_report`, or a rubric suite, `wander.eval.rubric_report`): their names, the tidy CSV, and
matrix.json read back. dvc.yaml declares the evaluate stage's outputs once, for every env.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

OUTPUTS = {
    "metrics": "metrics.json",
    "matrix": "matrix.json",
    "csv": "matrix.csv",
    "heatmap": "headline_heatmap.png",  # the suite's headline metric
    "bars": "headline_by_policy.png",
    "report": "report.md",
    "curve": "learning_curve.png",
    "episodes": "episodes.jsonl.gz",  # every game, which `wander ui` replays (wander/eval/episodes_file.py)
}


def finite(value: float | int | None) -> float | int | None:
    """`value`, or None for NaN and infinities (a rate over zero moves): JSON and the CSV have no NaN."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def csv_text(rows: list[dict]) -> str:
    """The tidy table: one row per policy x opponent x side."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: ("" if finite(v) is None else v) for k, v in r.items()} for r in rows)
    return buffer.getvalue()


def read_matrix(out_dir: str | Path) -> dict:
    """The matrix.json an evaluation wrote under `out_dir` (either kind)."""
    return json.loads((Path(out_dir) / OUTPUTS["matrix"]).read_text())
