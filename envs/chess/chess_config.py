"""Settings of the chess environment, with defaults a small model on two CPU cores can play through the pipeline."""

from __future__ import annotations

from dataclasses import dataclass

RENDERINGS = ("fen", "board")
REPLY_FORMATS = ("uci", "san")


@dataclass
class ChessConfig:
    """Everything that defines a chess task; `load_environment(**kwargs)` takes these fields.

    Three engine settings, one Stockfish binary: the opponent (`opponent_nodes`), the embedded teacher
    (`teacher_nodes`) and the judge (`judge_nodes`), which searches deeper than both."""

    rendering: str = "fen"
    """What a turn shows: "fen" (the position's FEN on one line) or "board" (an 8x8 grid, rank 8 first, `.` for an
    empty square, then the side to move, castling rights and en-passant square)."""

    legal_moves: bool = True
    """List the legal moves of the position under it (in the reply format), so a reply can copy one."""

    reply_format: str = "uci"
    """How a move is written inside `<move></move>`: "uci" (`e2e4`, `e7e8q`: one spelling per move) or "san"
    (`e4`, `Nf3`, `O-O`: what people write)."""

    max_turns: int = 20
    """Model turns per game, illegal ones included; a game still running after them is adjudicated by the engine
    (`adjudicate_cp`), or lost when the model's last reply was illegal."""

    random_move_prob: tuple[float, float] = (0.0, 1.0)
    """Range of the opponent's random-move probability: 1 = the random mover, 0 = Stockfish at `opponent_nodes`."""

    num_groups: int = 4
    """Difficulty strata: the range above cut into this many equal bins, balanced in every split."""

    opening_plies: int = 4
    """Random plies played before the model's first turn, from the episode seed, so games start from varied
    openings: 0 to this many in train, this many in eval and test, whose starting positions are never train's
    (envs/chess/openings.py); who moves after them is the model's side."""

    opponent_nodes: int = 2000
    """Stockfish's node budget per opponent move (one thread: the same move every time)."""

    judge_nodes: int = 20_000
    """Stockfish's node budget per search of the judge, which scores the model's moves (centipawn loss, blunders,
    GRPO's move values) and adjudicates games: above `opponent_nodes` and `teacher_nodes`, or the judge's best move
    would be the teacher's own and the centipawn loss would measure the distance from the teacher, not from good
    play. 10x the players' budget: ~26 ms a search on this project's CPUs (docs/experiments/chess.md)."""

    teacher_nodes: int = 2000
    """Stockfish's node budget per move of the embedded teacher."""

    allow_shallow_judge: bool = False
    """Let `judge_nodes` be at most `opponent_nodes` or `teacher_nodes`: only to reproduce measurements made
    before the judge searched deeper (docs/experiments/chess.md, 2026-12-07)."""

    blunder_cp: int = 200
    """Centipawns a move must lose against the engine's best move to count as a blunder."""

    adjudicate_cp: int = 300
    """A game still running after `max_turns`: won when the engine's evaluation for the model is at least this
    many centipawns, lost when it is at most minus this many, drawn in between (mate scores count as far beyond)."""

    engine_path: str | None = None
    """The Stockfish binary; None = `stockfish` on PATH or /usr/games/stockfish (Debian's; `make stockfish`)."""

    engines: int = 2
    """Stockfish processes at most, started as needed and closed with the env."""

    num_train: int = 2000
    """Episodes in the train split."""

    num_eval: int = 200
    """Episodes in the eval split."""

    num_test: int = 200
    """Episodes in the test split."""

    seed: int = 0
    """Split seed: decides every episode seed of the splits."""

    specs_dir: str | None = None
    """Folder of `<split>.jsonl` episode specs (the generate stage's); each split's seeds and strata come from it."""

    outcome_weight: float = 1.0
    """Weight of the outcome reward (win 1, draw 0.5, loss 0)."""

    format_weight: float = 0.2
    """Weight of the format reward (share of replies with one well-formed `<move>`)."""

    quality_weight: float = 0.5
    """Weight of move quality: the mean over the model's moves of 1 - centipawn loss / 1000 (capped at 1000)."""

    illegal_penalty: float = -0.1
    """Added per illegal or unreadable move."""

    def __post_init__(self) -> None:
        low, high = self.random_move_prob = tuple(float(x) for x in self.random_move_prob)
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"random_move_prob must be a range (low, high) within [0, 1], got {(low, high)}")
        if self.rendering not in RENDERINGS:
            raise ValueError(f"rendering must be one of {', '.join(RENDERINGS)}, got {self.rendering!r}")
        if self.reply_format not in REPLY_FORMATS:
            raise ValueError(
                f"reply_format must be one of {', '.join(REPLY_FORMATS)}, got {self.reply_format!r}"
            )
        if self.max_turns < 1 or self.num_groups < 1 or self.engines < 1:
            raise ValueError("max_turns, num_groups and engines must be at least 1")
        if self.opening_plies < 1:
            raise ValueError(
                f"opening_plies must be at least 1, got {self.opening_plies}: eval and test games start from "
                "positions train's never do, and the initial position is train's (4, the default, is the tested one)"
            )
        if min(self.opponent_nodes, self.judge_nodes, self.teacher_nodes) < 1:
            raise ValueError("opponent_nodes, judge_nodes and teacher_nodes must be at least 1")
        players = max(self.opponent_nodes, self.teacher_nodes)
        if self.judge_nodes <= players and not self.allow_shallow_judge:
            raise ValueError(
                f"judge_nodes ({self.judge_nodes}) must be above opponent_nodes ({self.opponent_nodes}) and "
                f"teacher_nodes ({self.teacher_nodes}): a judge searching no deeper than the players scores the "
                f"teacher's moves as perfect; raise judge_nodes above {players} (10x is the default), or set "
                "allow_shallow_judge: true to reproduce a measurement made with the old judge"
            )
        if self.blunder_cp < 1 or self.adjudicate_cp < 1:
            raise ValueError("blunder_cp and adjudicate_cp must be at least 1 centipawn")
