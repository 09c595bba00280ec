"""Learning demonstration: what SFT and each GRPO stage of a finished pipeline run add, next to the teacher.

It reads the run's own outputs, so it measures exactly what `make run` trained, with no recipe of its own:
`<eval out_dir>/matrix.json` (the sampled opponent matrix, both sides pooled, with 95% Wilson intervals, and the
exact greedy results of every model row) and each GRPO stage's metrics file (steps, the kept learning-curve point,
seconds per step). `python -m bench.learning [ROOT]` prints the table for the project at ROOT (default: here,
after `make run`); `bench.pipeline_speed` records it in bench/results.json for the run it times.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

# Issue 11's targets for the champion: exact greedy rates, both sides pooled.
TARGETS = {"random.win": 0.93, "random.loss": 0.01, "minimax-0.loss": 0.01, "random.move_optimality": 0.98}
SAMPLED = ("non_loss", "win", "loss", "invalid")
EXACT = ("win", "loss", "any_invalid", "move_optimality")


def learning_table(root: Path) -> dict:
    """Per lineage row (sft, grpo-*) and the baseline: sampled rates with intervals, exact rates, stage metrics."""
    params = yaml.safe_load((root / "params.yaml").read_text())
    matrix_file = root / params["evaluate"]["out_dir"] / "matrix.json"
    if not matrix_file.exists():
        raise FileNotFoundError(f"no {matrix_file}: run the pipeline there first (`make run`)")
    matrix = json.loads(matrix_file.read_text())
    baseline = params["evaluate"].get("baseline")
    rows = [n for n in matrix["policies"] if n == "sft" or n.startswith("grpo-")]
    table = {}
    for name in [*rows, *([baseline] if baseline in matrix["policies"] else [])]:
        overall = matrix["policies"][name]["overall"]
        entry: dict = {
            "sampled": {
                m: [round(overall[m], 4), round(overall[f"{m}_ci_low"], 4), round(overall[f"{m}_ci_high"], 4)]
                for m in SAMPLED
            }
        }
        exact = matrix.get("exact", {}).get(name)
        if exact:
            entry["exact"] = {
                f"{opp}.{m}": round(exact[opp][m], 4) for opp in ("random", "minimax-0") for m in EXACT
            }
        stage_file = root / params["layout"]["metrics"] / f"{name}.json"
        if name.startswith("grpo-") and stage_file.exists():
            stage = json.loads(stage_file.read_text())
            entry["stage"] = {k: stage.get(k) for k in ("steps", "kept_step", "seconds_per_step")}
        table[name] = entry
    return {"games_per_cell": matrix["games_per_cell"], "rows": table, "targets": TARGETS}


def text(table: dict) -> str:
    """The table as aligned lines: exact greedy rates per row, then the sampled non-loss with its interval."""
    lines = [
        f"{'row':<12} {'random win':>10} {'loss':>6} {'mm-0 loss':>9} {'optimal':>8}  sampled non-loss [95% CI]"
    ]
    for name, row in table["rows"].items():
        exact = row.get("exact")
        cells = (
            f"{exact['random.win']:>10.3f} {exact['random.loss']:>6.3f} {exact['minimax-0.loss']:>9.3f} "
            f"{exact['random.move_optimality']:>8.3f}"
            if exact
            else f"{'(sampled only)':>36}"
        )
        value, low, high = row["sampled"]["non_loss"]
        lines.append(f"{name:<12} {cells}  {value:.3f} [{low:.3f}, {high:.3f}]")
    targets = table["targets"]
    lines.append(
        f"{'target':<12} {targets['random.win']:>10.2f} {targets['random.loss']:>6.2f} "
        f"{targets['minimax-0.loss']:>9.2f} {targets['random.move_optimality']:>8.2f}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(text(learning_table(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("."))))
