"""A two-player game's outcome, shared by the game envs (tic-tac-toe, chess): the rubric functions that read an
episode state's `outcome` ("win", "draw" or "loss" for the model; None when the game ended without one, out of
turns, which counts as a loss) and the opponent matrix's outcome metrics, read the same way."""

from __future__ import annotations

from wander.core.episode import Episode
from wander.core.evaluation_suite import RATE, Metric

OUTCOME_REWARD = {"win": 1.0, "draw": 0.5, "loss": 0.0}


# ----- rubric functions: each receives only what it declares -----


def outcome(state: dict) -> float:
    """Win 1, draw 0.5, loss 0 (no outcome: a loss)."""
    return OUTCOME_REWARD.get(state["outcome"], 0.0)


def win(state: dict) -> float:
    """1 for a win."""
    return float(state["outcome"] == "win")


def draw(state: dict) -> float:
    """1 for a draw."""
    return float(state["outcome"] == "draw")


def loss(state: dict) -> float:
    """1 for a loss (including a game that ran out of turns with no outcome)."""
    return float(state["outcome"] not in ("win", "draw"))


# ----- the opponent matrix: one game's outcome as a rate -----


def won(ep: Episode) -> float:
    """1 when a finished game is the model's win."""
    return win({"outcome": ep.state.get("outcome")})


def drew(ep: Episode) -> float:
    """1 when a finished game is a draw."""
    return draw({"outcome": ep.state.get("outcome")})


def lost(ep: Episode) -> float:
    """1 when a finished game is the model's loss (or has no outcome)."""
    return loss({"outcome": ep.state.get("outcome")})


OUTCOME_METRICS: tuple[Metric, ...] = (
    Metric("win", RATE, digits=2, read=won, count="wins"),
    Metric("draw", RATE, digits=2, read=drew, count="draws"),
    Metric("loss", RATE, lower_is_better=True, digits=2, read=lost, count="losses"),
    Metric("non_loss", RATE, label="non-loss", digits=2, failures="losses"),
)
"""Wins, draws, losses and non-losses with their counts (so rows pool exactly), as both games' suites report them."""
