"""Tic-tac-toe rules and exact minimax over the whole game tree.

A board is a 9-character string, cells 0-8 row by row: "X", "O" or "." for empty.
X always moves first. Every reachable position (5,478 of them) is solved once at import.
"""

from __future__ import annotations

from functools import cache

EMPTY_BOARD = "." * 9
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
MASK64 = (1 << 64) - 1


@cache
def winner(board: str) -> str | None:
    """'X' or 'O' when that player has three in a line, else None."""
    for a, b, c in LINES:
        if board[a] != "." and board[a] == board[b] == board[c]:
            return board[a]
    return None


def to_move(board: str) -> str:
    """The player whose turn it is: X when the counts are equal."""
    return "X" if board.count("X") == board.count("O") else "O"


def legal_moves(board: str) -> tuple[int, ...]:
    """Empty cells, or none when the game is over."""
    if winner(board):
        return ()
    return tuple(i for i, c in enumerate(board) if c == ".")


def play(board: str, cell: int, mark: str) -> str:
    """The board after `mark` takes `cell` (the caller checks legality)."""
    return board[:cell] + mark + board[cell + 1 :]


def is_over(board: str) -> bool:
    """True when someone has won or the board is full."""
    return winner(board) is not None or "." not in board


def _solve() -> dict[str, int]:
    """Negamax score of every reachable position, from the view of the player to move.

    Draw 0; a lost terminal position scores -(1 + empty cells), so the search prefers faster
    wins and slower losses; the sign is the game-theoretic value.
    """
    scores: dict[str, int] = {}

    def score(board: str) -> int:
        if board in scores:
            return scores[board]
        if winner(board):
            s = -(1 + board.count("."))
        elif "." not in board:
            s = 0
        else:
            mark = to_move(board)
            s = max(-score(play(board, i, mark)) for i in legal_moves(board))
        scores[board] = s
        return s

    score(EMPTY_BOARD)
    return scores


SCORES = _solve()
STATES = tuple(sorted(SCORES))  # every position reachable from the empty board
_CODE = {b: i for i, b in enumerate(STATES)}


def _move_tables() -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]:
    best, optimal = {}, {}
    for board in STATES:
        moves = legal_moves(board)
        if not moves:
            continue
        mark = to_move(board)
        child = {i: -SCORES[play(board, i, mark)] for i in moves}
        top = max(child.values())
        value = (top > 0) - (top < 0)
        best[board] = tuple(i for i, s in child.items() if s == top)
        # In a lost position every move keeps the value; only the slowest losses are optimal there.
        optimal[board] = (
            best[board] if value < 0 else tuple(i for i, s in child.items() if (s > 0) - (s < 0) == value)
        )
    return best, optimal


BEST_MOVES, OPTIMAL_MOVES = _move_tables()
LEGAL_MOVES = {board: legal_moves(board) for board in STATES}


def value(board: str) -> int:
    """Game-theoretic value for the player to move: 1 win, 0 draw, -1 loss."""
    s = SCORES[board]
    return (s > 0) - (s < 0)


def best_moves(board: str) -> tuple[int, ...]:
    """Minimax moves, preferring faster wins and slower losses (ties all kept)."""
    return BEST_MOVES[board]


def optimal_moves(board: str) -> tuple[int, ...]:
    """Moves that keep the game-theoretic value (win stays win, draw stays draw); slowest losses when lost."""
    return OPTIMAL_MOVES[board]


def splitmix64(x: int) -> int:
    """A stable 64-bit hash of an integer, independent of process and call order."""
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def mix(seed: int, board: str) -> int:
    """A stable 64-bit hash of (seed, board)."""
    return splitmix64(seed * 5478 + _CODE[board])


def opponent_move(board: str, seed: int, random_move_prob: float) -> int:
    """Minimax with skill: a random legal move with probability `random_move_prob`.

    A pure function of (seed, board): identical positions get identical replies within an
    episode seed, so a GRPO group sees the same opponent.
    """
    h = mix(seed, board)
    if (h & 0xFFFFFFFF) < random_move_prob * 4294967296.0:
        pool = LEGAL_MOVES[board]
    else:
        pool = BEST_MOVES[board]
    return pool[(h >> 32) % len(pool)]


def opponent_distribution(board: str, random_move_prob: float) -> dict[int, float]:
    """The probability of each reply of `opponent_move` at `board`, over episode seeds."""
    probs: dict[int, float] = {}
    for pool, weight in ((LEGAL_MOVES[board], random_move_prob), (BEST_MOVES[board], 1.0 - random_move_prob)):
        for cell in pool:
            probs[cell] = probs.get(cell, 0.0) + weight / len(pool)
    return {c: p for c, p in probs.items() if p > 0.0}
