"""Outputs of a game's opponent matrix (an env whose `evaluation_suite` is "matrix"): headline metrics, the whole
matrix (JSON and tidy CSV), two plots and a Markdown report, all written atomically."""

from __future__ import annotations

import csv
import io
import json
import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: no display on servers or in CI
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from wander.core.atomic_io import write_atomic  # noqa: E402
from wander.core.episode import Episode  # noqa: E402
from wander.eval.compare import compare, conclusion  # noqa: E402
from wander.eval.matrix import MatrixResult, exact_lines, pooled, summary, worst_lines  # noqa: E402
from wander.policies.loading import is_scripted_name  # noqa: E402

OUTPUTS = {
    "metrics": "metrics.json",
    "matrix": "matrix.json",
    "csv": "matrix.csv",
    "heatmap": "headline_heatmap.png",  # the suite's headline metric (tic-tac-toe: non-loss rate)
    "bars": "headline_by_policy.png",
    "report": "report.md",
    "curve": "learning_curve.png",
}
SIDE_LABEL = {"first": "moves first", "second": "moves second"}
# What the plots say, for a game matrix; a rubric suite passes its own (wander/eval/rubric_report.py).
GAME_LABELS = {
    "title": "Non-loss rate",
    "axis": "non-loss rate (win + draw)",
    "columns": "opponent; the policy moves first (X) or second (O)",
    "interval": "95% Wilson interval",
    "bar_columns": "opponent",
    "pooled": "both sides",
}
STRING_FIELDS = ("policy", "opponent", "side", "decoding")


def _finite(value: float | int | None) -> float | int | None:
    # JSON has no NaN (a rate over zero moves): write null instead.
    return None if isinstance(value, float) and not math.isfinite(value) else value


# ----- metrics and CSV -----


def matrix_dict(result: MatrixResult, seed: int) -> dict:
    """The whole matrix as nested numbers: policies.<row>.overall and policies.<row>.opponents.<opponent>.<side>."""
    policies = {}
    for name in result.policies:
        rows = [r for r in result.rows if r["policy"] == name]
        opponents = {}
        for opponent in result.opponents:
            cells = [r for r in rows if r["opponent"] == opponent]
            sides = {r["side"]: {k: v for k, v in r.items() if k not in STRING_FIELDS} for r in cells}
            opponents[opponent] = {**sides, "both": summary(cells)}
        policies[name] = {"overall": summary(rows), "opponents": opponents}
    clean = json.loads(json.dumps(policies), parse_constant=lambda _: None)  # NaN -> null
    return {
        "games_per_cell": result.games,
        "seed": seed,
        "policies": clean,
        "exact": result.exact,
        "worst_case": result.worst,
    }


def plot_labels(result: MatrixResult) -> tuple[str, dict[str, str]]:
    """The metric the plots show and what they say about it: the non-loss rate per opponent and side."""
    return "non_loss", GAME_LABELS


def headline_policies(result: MatrixResult, baseline: str | None = None) -> list[str]:
    """The rows `dvc metrics` shows: the candidate (the last model row, not a scripted player) and the baseline."""
    names = list(result.policies)
    baseline = baseline or names[0]
    models = [n for n in names if n != baseline and not is_scripted_name(result.policies[n])]
    return [*models[-1:], baseline]


def _rate(rows: list[dict], metric: str) -> float | None:
    return _finite(round(pooled(rows, metric)["mean"], 4))


def headline_metrics(result: MatrixResult, baseline: str | None = None) -> dict:
    """A few numbers a person can compare across experiments, both sides pooled, for the candidate and the baseline.

    Per row: overall non-loss and invalid-game rates, win and loss against the weakest opponent (the first listed)
    and loss against the strongest (the last), and the same from the exact results where the row has them. The
    whole matrix (every row, opponent, side, interval and count) is matrix.json, matrix.csv and the report; DVC
    shows every number of a metrics file as a column, so this file stays small enough for `dvc exp show`.
    """
    weakest, strongest = result.opponents[0], result.opponents[-1]
    picks = ((weakest, "win"), (weakest, "loss"), (strongest, "loss"))
    out: dict = {}
    for name in headline_policies(result, baseline):
        rows = [r for r in result.rows if r["policy"] == name]
        head = {"all": {"non_loss": _rate(rows, "non_loss"), "invalid": _rate(rows, "invalid")}}
        for opponent, metric in picks:
            head.setdefault(opponent, {})[metric] = _rate(
                [r for r in rows if r["opponent"] == opponent], metric
            )
        if name in result.exact:
            exact = result.exact[name]
            head["exact"] = {o: {} for o in (weakest, strongest)}
            for opponent, metric in picks:
                head["exact"][opponent][metric] = round(exact[opponent][metric], 4)
        out[name] = head
    return out


def csv_text(rows: list[dict]) -> str:
    """The tidy table: one row per policy x opponent x side."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: ("" if _finite(v) is None else v) for k, v in r.items()} for r in rows)
    return buffer.getvalue()


# ----- plots -----


def _title(fig: plt.Figure, *lines: str) -> str:
    # About 11 characters of a 10-point title fit per inch: wrap so no line runs off the figure.
    width = int(fig.get_figwidth() * 11)
    return "\n".join(textwrap.fill(line, width=width) for line in lines)


def plot_heatmap(
    result: MatrixResult, path: Path, metric: str = "non_loss", labels: dict | None = None
) -> Path:
    """A metric (non-loss rate) of every cell, value and interval written in it; policies down, columns across."""
    labels = labels or GAME_LABELS
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
    ax.set_xticks(range(len(columns)), [f"{o}\n{SIDE_LABEL.get(s, s)}" for o, s in columns], fontsize=8)
    ax.set_yticks(range(len(names)), names, fontsize=9)
    ax.set_xlabel(labels["columns"])
    ax.set_ylabel("policy")
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02).set_label(labels["axis"])
    ax.set_title(
        _title(
            fig,
            f"{labels['title']} of {', '.join(names)}",
            f"{result.games} games per cell, {result.decoding}; [{labels['interval']}]",
        ),
        fontsize=10,
    )
    fig.tight_layout()
    write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    plt.close(fig)
    return path


def plot_bars(result: MatrixResult, path: Path, metric: str = "non_loss", labels: dict | None = None) -> Path:
    """A metric (non-loss rate) of each policy per column group (sides pooled), with 95% interval error bars."""
    labels = labels or GAME_LABELS
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
    ax.set_ylabel(labels["axis"])
    ax.grid(axis="y", alpha=0.3)
    ax.legend(title=labels["bar_columns"], loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    games = len(result.sides) * result.games
    ax.set_title(
        _title(
            fig,
            f"{labels['title']} of {', '.join(names)} by {labels['bar_columns']}",
            f"{games} games per bar ({labels['pooled']}), {result.decoding}; bars: {labels['interval']}",
        ),
        fontsize=10,
    )
    fig.tight_layout()
    write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    plt.close(fig)
    return path


# ----- text -----


def _ci(row: dict, metric: str) -> str:
    return f"{row[metric]:.2f} [{row[metric + '_ci_low']:.2f}, {row[metric + '_ci_high']:.2f}]"


def text_table(result: MatrixResult) -> str:
    """The matrix as a fixed-width table for a terminal."""
    head = f"{'policy':<16}{'opponent':<14}{'side':<8}{'win':>6}{'draw':>6}{'loss':>6}"
    head += f"{'non-loss [95% CI]':>22}{'invalid':>9}{'format':>8}{'optimal':>9}{'turns':>7}"
    scripted = any(r["decoding"] == "scripted" for r in result.rows)
    note = " (scripted players follow their own rule)" if scripted else ""
    lines = [f"{result.games} games per cell; decoding: {result.decoding}{note}", head]
    for r in result.rows:
        lines.append(
            f"{r['policy'][:15]:<16}{r['opponent']:<14}{r['side']:<8}{r['win']:>6.2f}{r['draw']:>6.2f}"
            f"{r['loss']:>6.2f}{_ci(r, 'non_loss'):>22}{r['invalid']:>9.2f}{r['format']:>8.2f}"
            f"{r['move_optimality']:>9.2f}{r['turns']:>7.1f}"
        )
    return "\n".join(lines)


def sample_games(episodes: list[Episode]) -> list[tuple[str, Episode]]:
    """A win, a loss and a game with an invalid move, when there are such games (first in suite order)."""
    kinds = {
        "a win": lambda ep: ep.state.get("outcome") == "win",
        "a loss": lambda ep: ep.state.get("outcome") not in ("win", "draw"),
        "an invalid move": lambda ep: ep.state.get("invalid", 0) > 0,
    }
    chosen: list[tuple[str, Episode]] = []
    for kind, test in kinds.items():
        taken = {id(ep) for _, ep in chosen}
        match = next((ep for ep in episodes if test(ep) and id(ep) not in taken), None)
        if match is not None:
            chosen.append((kind, match))
    return chosen


def markdown_report(result: MatrixResult, seed: int, baseline: str | None = None) -> str:
    """The report: settings, plots, summary, the full matrix, comparisons and sample games."""
    names = list(result.policies)
    cols = [(o, s) for o in result.opponents for s in result.sides]
    md = [
        "# Opponent matrix",
        "",
        f"Policies: {', '.join(f'`{n}`' for n in names)}. Opponents: {', '.join(result.opponents)}, each with the "
        f"policy moving first (X) and second (O). {result.games} games per cell from the frozen suite of seed "
        f"{seed}; decoding: {result.decoding}. Intervals are 95% Wilson intervals.",
        "",
        "| policy | spec | decoding | games | seconds | games/s |",
        "|---|---|---|---:|---:|---:|",
    ]
    for n in names:
        rows = [r for r in result.rows if r["policy"] == n]
        games, seconds = sum(r["games"] for r in rows), result.seconds.get(n, float("nan"))
        md.append(
            f"| {n} | `{result.policies[n]}` | {rows[0]['decoding']} | {games} | {seconds:.1f} | {games / seconds:.0f} |"
        )
    md += [
        "",
        f"![non-loss heatmap]({OUTPUTS['heatmap']})",
        "",
        f"![non-loss by policy]({OUTPUTS['bars']})",
        "",
    ]

    md += [
        "## Summary per policy",
        "",
        "| policy | non-loss | win | loss | invalid | format | optimal moves | turns |",
    ]
    md.append("|---|---|---|---|---|---|---|---:|")
    for n in names:
        s = summary([r for r in result.rows if r["policy"] == n])
        md.append(
            f"| {n} | {_ci(s, 'non_loss')} | {_ci(s, 'win')} | {_ci(s, 'loss')} | {_ci(s, 'invalid')} "
            f"| {s['format']:.2f} | {_ci(s, 'move_optimality')} | {s['turns']:.1f} |"
        )

    md += [
        "",
        "## Non-loss rate per cell",
        "",
        "| policy | " + " | ".join(f"{o} {s}" for o, s in cols) + " |",
    ]
    md.append("|---" * (len(cols) + 1) + "|")
    for n in names:
        md.append(f"| {n} | " + " | ".join(_ci(result.row(n, o, s), "non_loss") for o, s in cols) + " |")

    md += ["", "## Every cell", ""]
    for n in names:
        md += [
            f"### {n}",
            "",
            "| opponent | side | win | draw | loss | invalid | format | optimal moves | turns |",
        ]
        md.append("|---|---|---|---|---|---|---|---|---:|")
        for o, s in cols:
            r = result.row(n, o, s)
            md.append(
                f"| {o} | {s} | {_ci(r, 'win')} | {_ci(r, 'draw')} | {_ci(r, 'loss')} | {_ci(r, 'invalid')} "
                f"| {_ci(r, 'format')} | {_ci(r, 'move_optimality')} | {r['turns']:.1f} |"
            )
        md.append("")

    base = baseline or names[0]
    if len(names) > 1:
        md += [
            f"## Compared with `{base}`",
            "",
            "B is better when its non-loss interval lies wholly above the",
        ]
        md += ["baseline's, worse when wholly below; overlapping intervals are no clear difference.", ""]
        for n in (n for n in names if n != base):
            found = compare(*([r for r in result.rows if r["policy"] == p] for p in (base, n)))
            md += [
                f"**{conclusion(found, base, n)}**",
                "",
                f"| column | {base} | {n} | verdict |",
                "|---|---|---|---|",
            ]
            for c in found:
                a, b = (f"{c[k]:.2f} [{c[k + '_ci_low']:.2f}, {c[k + '_ci_high']:.2f}]" for k in ("a", "b"))
                md.append(f"| {c['opponent']} {c['side']} | {a} | {b} | {c['verdict']} |")
            md.append("")

    md += exact_lines(result) + worst_lines(result)
    if result.curves:
        md += ["## Learning curve", "", f"![learning curve]({OUTPUTS['curve']})", ""]
    md += ["## Sample games", ""]
    for n in names:
        for kind, ep in sample_games(result.episodes[n]):
            spec = ep.spec
            mark = "X" if spec["model_starts"] else "O"
            md += [
                f"### {n}: {kind} vs {spec['opponent']}, {SIDE_LABEL[spec['side']]} ({mark}), seed {spec['seed']}",
                "",
                f"Outcome: {ep.state.get('outcome') or 'loss (out of turns)'}; invalid moves: {ep.state.get('invalid', 0)}.",
                "",
                "```text",
                result.render(ep),
                "```",
                "",
            ]
    return "\n".join(md).rstrip() + "\n"
