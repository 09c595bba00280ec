"""Tic-tac-toe against a minimax opponent whose skill is a random-move probability."""

from envs.tictactoe.env import TicTacToeEnv
from envs.tictactoe.players import ExpertPlayer, MinimaxPlayer, RandomPlayer
from envs.tictactoe.tictactoe_config import TicTacToeConfig
from wander.core.registry import config_from_kwargs


def load_environment(**kwargs: object) -> TicTacToeEnv:
    """Build the tic-tac-toe env; keyword arguments are TicTacToeConfig fields."""
    return TicTacToeEnv(config_from_kwargs(TicTacToeConfig, "tictactoe", kwargs))


__all__ = [
    "ExpertPlayer",
    "MinimaxPlayer",
    "RandomPlayer",
    "TicTacToeConfig",
    "TicTacToeEnv",
    "load_environment",
]
