"""Learning curves: the env's curve metrics logged during each GRPO stage, joined into one plot across stages.

Each grpo stage writes `curve.json` into its model folder: a list of `{"step": N, "<opponent>/<metric>": x}`, step 0
being the stage's start model (SFT for the first stage); `dvc plots show data/models/grpo/<stage>/curve.json -x step`.
`plot_curves` lays the stages end to end.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: no display on servers or in CI
import matplotlib.pyplot as plt  # noqa: E402

from wander.core.atomic_io import write_atomic  # noqa: E402

CURVE_FILE = "curve.json"


def curve_points(log_history: list[dict]) -> list[dict]:
    """The `curve/` entries of a trainer's log history, as `{"step": N, key: value}` without the prefix."""
    points = []
    for entry in log_history:
        values = {k.removeprefix("curve/"): v for k, v in entry.items() if k.startswith("curve/")}
        if values:
            points.append({"step": int(entry.get("step", 0)), **values})
    return points


def read_curves(model_dirs: dict[str, str]) -> list[tuple[str, list[dict]]]:
    """(name, points) of every model folder, in the given order, that holds a learning curve."""
    paths = {name: Path(d) / CURVE_FILE for name, d in model_dirs.items()}
    return [(name, json.loads(p.read_text())) for name, p in paths.items() if p.is_file()]


def rate_series(curves: list[tuple[str, list[dict]]]) -> tuple[tuple[str, str], ...]:
    """(key, label) of every rate the curves have: each key but the step and the point's wall-clock `seconds`."""
    keys = {k for _, points in curves for p in points for k in p}
    return tuple((k, k) for k in sorted(keys - {"step", "seconds"}))


def plot_curves(
    curves: list[tuple[str, list[dict]]], path: Path, series: tuple[tuple[str, str], ...] = ()
) -> Path:
    """One PNG: each (key, label) of `series` (the env suite's `curve_series`; () = every key the curves have)
    against the cumulative GRPO step, stage boundaries marked (a note when there is no curve)."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    offset = 0
    series = series or rate_series(curves)
    joined: dict[str, tuple[list[int], list[float]]] = {key: ([], []) for key, _ in series}
    for index, (stage, points) in enumerate(curves):
        for point in points:
            for key, _ in series:
                if key in point:
                    joined[key][0].append(offset + point["step"])
                    joined[key][1].append(point[key])
        if index:
            ax.axvline(offset, color="grey", linestyle=":", linewidth=1)
        ax.text(offset, 1.02, stage, fontsize=8, transform=ax.get_xaxis_transform())
        offset += max((p["step"] for p in points), default=0)
    for key, label in series:
        steps, values = joined[key]
        if steps:
            ax.plot(steps, values, marker="o", markersize=3, label=label)
    if not any(steps for steps, _ in joined.values()):
        ax.text(
            0.5, 0.5, "no learning curve in these rows (no GRPO model folder with curve.json)", ha="center"
        )
    else:
        ax.legend(fontsize=8, loc="center right")
    ax.set_xlabel("GRPO step (stages end to end; step 0 = the SFT model)")
    ax.set_ylabel("rate (exact, greedy, both sides)")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    plt.close(fig)
    return path
