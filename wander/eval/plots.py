"""The plots of an evaluation: the suite's headline metric per cell (heatmap) and per policy and column group (bars).

What they say (title, axis, columns, interval) is the suite's (`EvaluationSuite.plot_labels`).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: no display on servers or in CI
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from wander.core.atomic_io import write_atomic  # noqa: E402
from wander.eval.cells import pooled  # noqa: E402
from wander.eval.matrix_result import MatrixResult  # noqa: E402


def _title(fig: plt.Figure, *lines: str) -> str:
    # About 11 characters of a 10-point title fit per inch: wrap so no line runs off the figure.
    width = int(fig.get_figwidth() * 11)
    return "\n".join(textwrap.fill(line, width=width) for line in lines)


def plot_heatmap(result: MatrixResult, path: Path) -> Path:
    """The suite's headline metric of every cell, value and interval written in it; policies down, columns across."""
    metric, labels = result.headline, result.suite.plot_labels
    names = list(result.policies)
    columns = [(o, s) for o in result.opponents for s in result.sides]
    cells = [[result.row(p, o, s) for o, s in columns] for p in names]
    values = np.array([[c[metric] for c in row] for row in cells])
    label_width = 0.08 * max(len(n) for n in names)  # inches taken by the longest row name
    fig, ax = plt.subplots(
        figsize=(max(8.0, 1.15 * len(columns) + label_width + 2.5), max(3.2, 0.65 * len(names) + 2.4))
    )
    image = ax.imshow(values, cmap="RdYlGn", vmin=0.0, vmax=1.0, aspect="auto")
    for i, row in enumerate(cells):
        for j, c in enumerate(row):
            v = c[metric]
            color = "black" if 0.2 < v < 0.85 else "white"  # dark ends of RdYlGn need white text
            ax.text(
                j, i - 0.12, f"{v:.2f}", ha="center", va="center", color=color, fontsize=11, weight="bold"
            )
            ax.text(
                j, i + 0.22, f"[{c[metric + '_ci_low']:.2f}, {c[metric + '_ci_high']:.2f}]", ha="center",
                va="center", color=color, fontsize=7,
            )  # fmt: skip
    for k in range(1, len(result.opponents)):
        ax.axvline(2 * k - 0.5, color="white", linewidth=3)  # separates opponents
    ax.set_xticks(range(len(columns)), [f"{o}\n{result.suite.side_name(s)}" for o, s in columns], fontsize=8)
    ax.set_yticks(range(len(names)), names, fontsize=9)
    ax.set_xlabel(labels.columns)
    ax.set_ylabel("policy")
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02).set_label(labels.axis)
    ax.set_title(
        _title(
            fig,
            f"{labels.title} of {', '.join(names)}",
            f"{result.games} games per cell, {result.decoding}; [{labels.interval}]",
        ),
        fontsize=10,
    )
    fig.tight_layout()
    write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    plt.close(fig)
    return path


def plot_bars(result: MatrixResult, path: Path) -> Path:
    """The suite's headline metric of each policy per column group (sides pooled), with 95% interval error bars."""
    metric, labels = result.suite.metric(result.headline), result.suite.plot_labels
    names, opponents = list(result.policies), result.opponents
    width = 0.8 / len(opponents)
    colors = plt.get_cmap("viridis")(np.linspace(0.0, 0.9, len(opponents)))
    fig, ax = plt.subplots(figsize=(max(8.0, 1.4 * len(names) * max(1, len(opponents) / 4) + 2.5), 4.8))
    x = np.arange(len(names))
    for k, opponent in enumerate(opponents):
        stats = [
            pooled([r for r in result.rows if r["policy"] == p and r["opponent"] == opponent], metric)
            for p in names
        ]
        means = np.array([s["mean"] for s in stats])
        bounds = [[m - s["ci_low"], s["ci_high"] - m] for m, s in zip(means, stats, strict=True)]
        errors = np.clip(
            np.array(bounds).T, 0.0, None
        )  # rounding can put a bound a hair inside a rate of 0 or 1
        offset = (k - (len(opponents) - 1) / 2) * width
        bars = ax.bar(x + offset, means, width, yerr=errors, capsize=3, color=colors[k], label=opponent)
        if len(names) * len(opponents) <= 40:
            texts = [f"{m:.2f}" for m in means]
            box = {"boxstyle": "round,pad=0.15", "facecolor": "white", "alpha": 0.8, "linewidth": 0}
            ax.bar_label(bars, texts, fontsize=7, label_type="center", bbox=box)  # readable on any bar colour
    tilt = len(names) > 2 and max(len(n) for n in names) > 14  # long names side by side would overlap
    ax.set_xticks(x, names, rotation=20 if tilt else 0, ha="right" if tilt else "center")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("policy (rows in lineage order)")
    ax.set_ylabel(labels.axis)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(title=labels.bar_columns, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    games = len(result.sides) * result.games
    ax.set_title(
        _title(
            fig,
            f"{labels.title} of {', '.join(names)} by {labels.bar_columns}",
            f"{games} games per bar ({labels.pooled}), {result.decoding}; bars: {labels.interval}",
        ),
        fontsize=10,
    )
    fig.tight_layout()
    write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    plt.close(fig)
    return path
