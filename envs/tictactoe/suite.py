"""Tic-tac-toe's evaluation suite as data: opponents x who moves first, game outcomes as rates, the report's words.

`TicTacToePipeline.evaluation_suite()` returns `SUITE`; the generic evaluation code (wander/eval/) reads every
metric's kind, direction and per-game value from it. Outcomes are read from the game's state: a game that runs out
of turns has no outcome and counts as a loss.
"""

from __future__ import annotations

from wander.core.episode import Episode
from wander.core.evaluation_suite import (
    MATRIX,
    MEAN,
    RATE,
    RATIO,
    EvaluationSuite,
    Metric,
    PlotLabels,
    ReportLayout,
)
from wander.core.game_outcome import OUTCOME_METRICS, lost, won

DEFAULT_OPPONENTS = ("random", "minimax-0.75", "minimax-0.5", "minimax-0.25", "minimax-0")  # weakest first
SIDES = ("first", "second")
SIDE_NAMES = (("first", "moves first"), ("second", "moves second"))


def _invalid(ep: Episode) -> float:
    return float(ep.state.get("invalid", 0) > 0)


def sample_title(ep: Episode) -> str:
    """A sample game's heading: the opponent, who moved first (and the policy's mark), the seed."""
    spec = ep.spec
    mark = "X" if spec["model_starts"] else "O"
    return f"vs {spec['opponent']}, {dict(SIDE_NAMES)[spec['side']]} ({mark}), seed {spec['seed']}"


def sample_note(ep: Episode) -> str:
    """A sample game's outcome and invalid moves."""
    return f"Outcome: {ep.state.get('outcome') or 'loss (out of turns)'}; invalid moves: {ep.state.get('invalid', 0)}."


METRICS = (
    *OUTCOME_METRICS,
    Metric("invalid", RATE, lower_is_better=True, digits=2, read=_invalid, count="invalid_games"),
    Metric(
        "move_optimality",
        RATIO,
        label="optimal moves",
        short="optimal",
        digits=2,
        read=lambda ep: ep.state.get("optimal", 0),
        trials=lambda ep: ep.state.get("model_moves", 0),
        count="optimal_moves",
        trials_count="moves",
    ),
    Metric("format", MEAN, digits=2, spread=False),
    Metric("turns", MEAN, digits=1, plain=True, spread=False),
)

REPORT = ReportLayout(
    title="Opponent matrix",
    intro="Opponents: {groups}, each with the policy moving first (X) and second (O). {games} games per cell from "
    "the frozen suite of seed {seed}; decoding: {decoding}. Intervals are 95% Wilson intervals.",
    group_label="opponent",
    side_label="side",
    side_names=SIDE_NAMES,
    plot=PlotLabels(
        title="Non-loss rate",
        axis="non-loss rate (win + draw)",
        columns="opponent; the policy moves first (X) or second (O)",
        interval="95% Wilson interval",
        bar_columns="opponent",
        pooled="both sides",
    ),
    summary=("non_loss", "win", "loss", "invalid", "format", "move_optimality", "turns"),
    cells=("win", "draw", "loss", "invalid", "format", "move_optimality", "turns"),
    terminal=("win", "draw", "loss", "non_loss", "invalid", "format", "move_optimality", "turns"),
    overview=("non_loss", "invalid"),
    extremes=((0, "win"), (0, "loss"), (-1, "loss")),  # the weakest opponent listed first, the strongest last
    outcomes=("win", "draw", "loss"),
    samples=(("a win", won), ("a loss", lost), ("an invalid move", _invalid)),
    sample_title=sample_title,
    sample_note=sample_note,
)

SUITE = EvaluationSuite(
    metrics=METRICS,
    groups=DEFAULT_OPPONENTS,
    sides=SIDES,
    headline="non_loss",
    kind=MATRIX,
    spec_columns=(("opponent_random_move_prob", "random_move_prob"),),
    report=REPORT,
    curve_series=(
        ("minimax-0/loss", "loss vs minimax-0"),
        ("random/win", "win vs random"),
        ("minimax-0/any_invalid", "games with an invalid move (vs minimax-0)"),
        ("random/any_invalid", "games with an invalid move (vs random)"),
        ("adversary/loss", "sides an opponent that knows the model beats"),
    ),
)
