"""Scripted chess players: Stockfish at a node budget that slips to a random legal move with a probability (1 =
the random mover). The same choice plays the env's opponent, the embedded teacher and the reference rows; each
random draw comes from (seed, position), so the same position gets the same move every time it is asked."""

from __future__ import annotations

import random

import chess

from envs.chess.engine import EnginePool
from envs.chess.render import move_text, parse_position
from wander.core.policy import Conversation, Reply, UnplayableRequest

OPPONENT_PREFIX = "stockfish"


def choose_move(board: chess.Board, pool: EnginePool, nodes: int, slip: float, seed: int) -> chess.Move:
    """A random legal move with probability `slip`, else the engine's move at `nodes`; drawn from (seed, FEN)."""
    rng = random.Random(f"{seed}:{board.fen()}")
    if rng.random() < slip:
        return rng.choice(sorted(board.legal_moves, key=chess.Move.uci))
    return chess.Move.from_uci(pool.best(board.fen(), nodes)[0])


def opponent_skill(name: str) -> float:
    """The random-move probability an opponent name stands for: `random` is 1, `stockfish-<p>` is p, `stockfish`
    is 0; raises ValueError naming the accepted forms."""
    if name == "random":
        return 1.0
    kind, _, p = name.partition("-")
    try:
        skill = float(p) if p else 0.0
    except ValueError:
        skill = -1.0
    if kind != OPPONENT_PREFIX or not 0.0 <= skill <= 1.0:
        raise ValueError(
            f"unknown chess opponent {name!r}: use random or stockfish-<p>, p the random-move probability in [0, 1] "
            "(stockfish-0: the engine's every move)"
        )
    return skill


class EnginePlayer:
    """A policy that reads the position from the last user message and answers `<move>...</move>`."""

    scripted = True

    def __init__(self, pool: EnginePool, nodes: int, reply_format: str, slip: float = 0.0, seed: int = 0):
        self.pool, self.nodes, self.reply_format, self.slip, self.seed = pool, nodes, reply_format, slip, seed

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        """One move per conversation."""
        return [Reply(self.reply(c)) for c in conversations]

    def reply(self, conversation: Conversation) -> str:
        """The reply to one conversation; UnplayableRequest when it shows no position to move at."""
        last = conversation[-1] if conversation else None
        if (
            not isinstance(last, dict)
            or last.get("role") != "user"
            or not isinstance(last.get("content"), str)
        ):
            raise UnplayableRequest("the last message is not the user's")
        board = parse_position(last["content"])
        if board is None:
            raise UnplayableRequest(
                "the last user message shows no chess position (a FEN line or an 8x8 board)"
            )
        if board.is_game_over():
            raise UnplayableRequest(f"the game is over at {board.fen()}")
        move = choose_move(board, self.pool, self.nodes, self.slip, self.seed)
        return f"<move>{move_text(board, move, self.reply_format)}</move>"
