"""Chess's evaluation suite as data: opponents x the model's colour, outcomes as rates, legal replies as a ratio,
centipawn loss and blunders as means; the report's words. Outcomes are read from the game's state (a game past
`max_turns` is adjudicated by the engine, so every game has one)."""

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

DEFAULT_OPPONENTS = ("random", "stockfish-0.5", "stockfish-0")  # weakest first
SIDES = ("white", "black")
SIDE_NAMES = (("white", "plays white"), ("black", "plays black"))


def _illegal(ep: Episode) -> float:
    return float(ep.state.get("illegal", 0) > 0)


def sample_title(ep: Episode) -> str:
    """A sample game's heading: the opponent, the model's colour, the seed."""
    return f"vs {ep.spec['opponent']}, {dict(SIDE_NAMES)[ep.spec['side']]}, seed {ep.spec['seed']}"


def sample_note(ep: Episode) -> str:
    """A sample game's outcome, how it ended and its illegal replies."""
    state = ep.state
    return (
        f"Outcome: {state.get('outcome')} ({state.get('ending')}); illegal replies: {state.get('illegal', 0)}; "
        f"moves: {' '.join(state.get('moves', []))}."
    )


METRICS = (
    *OUTCOME_METRICS,
    Metric(
        "illegal",
        RATE,
        label="games with an illegal reply",
        short="illegal",
        lower_is_better=True,
        digits=2,
        read=_illegal,
        count="illegal_games",
    ),
    Metric(
        "legal_rate",
        RATIO,
        label="legal replies",
        short="legal",
        digits=3,
        read=lambda ep: ep.state.get("model_moves", 0),
        trials=lambda ep: ep.state.get("turn", 0),
        count="legal_replies",
        trials_count="replies",
    ),
    Metric(
        "acpl",
        MEAN,
        label="mean centipawn loss",
        short="acpl",
        lower_is_better=True,
        digits=0,
        bounds=(0.0, 1000.0),
    ),
    Metric(
        "blunders",
        MEAN,
        label="blunders per game",
        short="blunders",
        lower_is_better=True,
        digits=2,
        bounds=(0.0, float("inf")),
    ),
    Metric("format", MEAN, digits=2, spread=False),
    Metric("turns", MEAN, digits=1, plain=True, spread=False),
)

REPORT = ReportLayout(
    title="Opponent matrix",
    intro="Opponents: {groups} (stockfish-<p>: Stockfish that plays a random move with probability p), each with "
    "the policy playing white and black. {games} games per cell from the frozen suite of seed {seed}; decoding: "
    "{decoding}. Intervals are 95% (Wilson for rates and ratios).",
    group_label="opponent",
    side_label="colour",
    side_names=SIDE_NAMES,
    plot=PlotLabels(
        title="Win rate",
        axis="win rate (adjudicated wins included)",
        columns="opponent; the policy plays white or black",
        interval="95% Wilson interval",
        bar_columns="opponent",
        pooled="both colours",
    ),
    summary=("win", "non_loss", "loss", "legal_rate", "acpl", "blunders", "turns"),
    cells=("win", "draw", "loss", "illegal", "legal_rate", "acpl", "blunders", "format", "turns"),
    terminal=("win", "draw", "loss", "legal_rate", "acpl", "blunders", "format", "turns"),
    overview=("win", "non_loss", "legal_rate", "acpl"),
    extremes=((0, "win"), (0, "loss"), (-1, "loss")),  # the weakest opponent listed first, the strongest last
    outcomes=("win", "draw", "loss"),
    samples=(("a win", won), ("a loss", lost), ("an illegal reply", _illegal)),
    sample_title=sample_title,
    sample_note=sample_note,
)

SUITE = EvaluationSuite(
    metrics=METRICS,
    groups=DEFAULT_OPPONENTS,
    sides=SIDES,
    headline="win",
    kind=MATRIX,
    spec_columns=(("opponent_random_move_prob", "random_move_prob"),),
    report=REPORT,
)
