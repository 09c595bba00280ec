"""Chess against Stockfish, the engine also the teacher and the judge: the model plays one colour from a seeded
opening against an engine that slips to random moves with a probability (the difficulty strata), replies one move
in `<move></move>`, and is scored on the outcome (adjudicated by the engine after `max_turns`), its legal replies
and the centipawn loss of its moves. `load_environment(**kwargs)`: its keyword defaults are the env's config."""

from envs.chess.chess_config import ChessConfig
from envs.chess.engine import EnginePool, find_stockfish
from envs.chess.env import ChessEnv
from envs.chess.players import EnginePlayer
from wander.core.registry import config_from_kwargs


def load_environment(**kwargs: object) -> ChessEnv:
    """Build the chess env; keyword arguments are ChessConfig fields."""
    return ChessEnv(config_from_kwargs(ChessConfig, "chess", kwargs))


__all__ = ["ChessConfig", "ChessEnv", "EnginePlayer", "EnginePool", "find_stockfish", "load_environment"]
