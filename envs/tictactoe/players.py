"""Scripted tic-tac-toe players that speak the policy protocol: they read the board from text."""

from __future__ import annotations

import random

from envs.tictactoe.board import LINES, SCORES, best_moves, is_over, legal_moves, play, to_move, winner
from envs.tictactoe.render import parse_board, reply_text
from wander.core.policy import Conversation, Reply, UnplayableRequest


def board_of(conversation: Conversation) -> str:
    """The board of the latest message, which must be the user's and show a game still in play."""
    if not conversation:
        raise UnplayableRequest(
            "the conversation has no messages; send the game's latest board as a user message"
        )
    last = conversation[-1]
    role = last.get("role") if isinstance(last, dict) else None
    if role != "user":
        raise UnplayableRequest(
            f"the last message is from {role!r}, not the user; a move answers the user's latest board"
        )
    content = last.get("content")
    board = parse_board(content) if isinstance(content, str) else None
    if board is None:
        raise UnplayableRequest(
            "the last user message shows no tic-tac-toe board (rows like 'X.O/.X./..O' or the grid rendering); "
            "is this a tictactoe conversation?"
        )
    shown = f"{board[:3]}/{board[3:6]}/{board[6:]}"
    if board not in SCORES:
        raise UnplayableRequest(
            f"the board {shown} cannot arise in a game (X moves first, the players alternate, play stops at a win)"
        )
    if is_over(board):
        won = winner(board)
        raise UnplayableRequest(
            f"the game on board {shown} is over ({f'{won} won' if won else 'a draw'}); no move is left"
        )
    return board


class RandomPlayer:
    """Plays a uniformly random legal move."""

    scripted = True  # reports say "scripted" for its decoding: it follows its own rule, not a temperature

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)

    def choose(self, board: str) -> int:
        """A random empty cell."""
        return self.rng.choice(legal_moves(board))

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        """One `<move>` per conversation."""
        return [Reply(f"<move>{self.choose(board_of(c))}</move>") for c in conversations]


class MinimaxPlayer(RandomPlayer):
    """Minimax (ties broken at random) that plays a random legal move with `random_move_prob`."""

    def __init__(self, random_move_prob: float = 0.0, seed: int = 0):
        if not 0.0 <= random_move_prob <= 1.0:
            raise ValueError(f"random_move_prob must be within [0, 1], got {random_move_prob}")
        super().__init__(seed)
        self.random_move_prob = random_move_prob

    def choose(self, board: str) -> int:
        """A best move, or with probability random_move_prob a random one."""
        if self.rng.random() < self.random_move_prob:
            return self.rng.choice(legal_moves(board))
        return self.rng.choice(best_moves(board))


class ExpertPlayer(MinimaxPlayer):
    """The teacher's brain: plays like a good but imperfect LLM and explains its move in `<think>`.

    It never misses an immediate win or a needed block (tactics a good model sees); in quiet
    positions it misjudges with probability `random_move_prob` and plays a random legal move,
    else a minimax move. Strategic slips lose to perfect play but rarely to a random player.
    """

    def choose(self, board: str) -> int:
        """A winning or blocking move when there is one, else minimax with random slips."""
        forced = tactical_moves(board)
        if forced:
            return self.rng.choice(forced)
        return super().choose(board)

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        """One `<move>` per conversation, after a `<think>` rationale when the system prompt asks for one."""
        replies = []
        for conversation in conversations:
            board = board_of(conversation)
            cell = self.choose(board)
            reason = rationale(board, cell) if asks_for_reasoning(conversation) else None
            replies.append(Reply(reply_text(cell, reason)))
        return replies


def asks_for_reasoning(conversation: Conversation) -> bool:
    """Whether the conversation's system prompt asks for a `<think>` block, as an instruction-following model reads it."""
    system = next((m.get("content") or "" for m in conversation if m.get("role") == "system"), "")
    return "<think>" in system


def _completes(board: str, cell: int, mark: str) -> bool:
    after = play(board, cell, mark)
    return any(after[a] == after[b] == after[c] == mark for a, b, c in LINES if cell in (a, b, c))


def tactical_moves(board: str) -> tuple[int, ...]:
    """Moves that win at once, else moves that block the opponent's immediate win, else none."""
    me = to_move(board)
    them = "O" if me == "X" else "X"
    moves = legal_moves(board)
    wins = tuple(c for c in moves if _completes(board, c, me))
    return wins or tuple(c for c in moves if _completes(board, c, them))


def rationale(board: str, cell: int) -> str:
    """A one-line reason for a move, as a good player would say it."""
    me = to_move(board)
    them = "O" if me == "X" else "X"
    if _completes(board, cell, me):
        return f"Cell {cell} completes my line and wins."
    if _completes(board, cell, them):
        return f"The opponent threatens a line through {cell}, so I block it."
    if cell == 4:
        return "The center is the strongest open cell."
    if cell in (0, 2, 6, 8):
        return f"Corner {cell} keeps my options open."
    return f"Edge {cell} is a safe move here."


def scripted_player(name: str, seed: int = 0) -> RandomPlayer:
    """A player by name: `random`, `minimax` or `minimax-<p>`, `expert` or `expert-<p>`."""
    kind, _, prob = name.partition("-")
    classes = {"random": RandomPlayer, "minimax": MinimaxPlayer, "expert": ExpertPlayer}
    if kind not in classes or (kind == "random" and prob):
        raise ValueError(
            f"unknown scripted player {name!r}; use random, minimax[-P] or expert[-P] with P in [0, 1]"
        )
    if kind == "random":
        return RandomPlayer(seed=seed)
    try:
        p = float(prob) if prob else 0.0
    except ValueError:
        raise ValueError(f"bad random-move probability in {name!r}; write e.g. minimax-0.25") from None
    return classes[kind](random_move_prob=p, seed=seed)


def opponent_skill(name: str) -> float:
    """The random-move probability of an opponent name: `random` is 1.0, `minimax-<p>` is p."""
    kind, _, prob = name.partition("-")
    if kind == "random" and not prob:
        return 1.0
    if kind == "minimax":
        try:
            p = float(prob) if prob else 0.0
        except ValueError:
            p = -1.0
        if 0.0 <= p <= 1.0:
            return p
    raise ValueError(f"unknown opponent {name!r}; use random, minimax or minimax-<p> with p in [0, 1]")
