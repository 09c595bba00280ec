"""Tic-tac-toe against a minimax opponent whose skill is a random-move probability."""

from envs.tictactoe.env import TicTacToeEnv
from envs.tictactoe.players import ExpertPlayer, MinimaxPlayer, RandomPlayer
from envs.tictactoe.tictactoe_config import TicTacToeConfig


def load_environment(**kwargs: object) -> TicTacToeEnv:
    """Build the tic-tac-toe env; keyword arguments are TicTacToeConfig fields."""
    return TicTacToeEnv(TicTacToeConfig.from_kwargs(**kwargs))


__all__ = [
    "ExpertPlayer",
    "MinimaxPlayer",
    "RandomPlayer",
    "TicTacToeConfig",
    "TicTacToeEnv",
    "load_environment",
]
