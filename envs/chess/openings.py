"""Seeded openings whose positions keep the splits apart: no eval or test game starts where a train game can.

Seed ranges alone do not: with 0 to 4 random plies there are few short openings (the initial position, 20 after one
ply, 400 after two), so eval games would start from positions trained on, and measure memory. So the position after
the opening (its EPD: pieces, side to move, castling, en passant; no move counters, so transpositions count as one)
is hashed into shares: one in `SHARE_EVERY` for eval, one for test, the rest for train. An episode's seed range says
its split (`SPLIT_SEEDS`; the frozen evaluation suite draws test seeds), and its opening is redrawn from the seed
until the position falls in that split's share, so the guarantee holds for any spec made from a seed, wherever it is
made. Train openings keep their length of 0 to `opening_plies` plies (the initial position is train's by its hash);
eval and test openings are `opening_plies` plies long, where positions are plentiful (~17,000 distinct in 20,000
random 4-ply openings against 400 after two plies), and `distinct_split_specs` keeps an eval or test split from
repeating one.
"""

from __future__ import annotations

import hashlib
import random
from typing import Protocol

import chess

from wander.core.splits import SPLIT_SEEDS

SHARE_EVERY = 10
"""One position in this many starts eval games only, one test games only; train keeps the other eight."""
SHARES = {0: "eval", 1: "test"}
MAX_DRAWS = 1000
"""Openings drawn for one seed (each lands in a split's share with odds of about 1 in 10) before giving up."""
SPLIT_DRAWS = 50
"""Seeds drawn per wanted spec before an eval or test split is found too large for its distinct openings."""


class OpeningSplits(Protocol):
    seed: int
    num_groups: int
    sizes: dict[str, int]

    def make_spec(self, seed: int, stratum: int | None = None) -> dict: ...


def position_key(board: chess.Board) -> str:
    """A position as the rules compare them (EPD, en passant only when a capture is legal): no move counters."""
    return board.epd()


def position_share(board: chess.Board) -> str:
    """The split whose games may start at this position: "eval", "test" or "train", by a hash of `position_key`."""
    digest = int(hashlib.sha256(position_key(board).encode()).hexdigest(), 16)
    return SHARES.get(digest % SHARE_EVERY, "train")


def seed_split(seed: int) -> str:
    """The split whose seed range holds `seed`; "train" outside every range (a seed given to `reset` by hand)."""
    return next((name for name, (low, high) in SPLIT_SEEDS.items() if low <= seed < high), "train")


def opening_board(moves: list[str]) -> chess.Board:
    """The position after `moves` (UCI) from the initial position."""
    board = chess.Board()
    for uci in moves:
        board.push_uci(uci)
    return board


def opening_moves(seed: int, plies: int) -> list[str]:
    """The seed's opening in its split's share of positions: random legal plies from the initial position, 0 to
    `plies` of them for train, `plies` for eval and test; never a finished game. ValueError when no opening of
    the share turns up (`plies` too small for the split to have positions of its own)."""
    split = seed_split(seed)
    rng = random.Random(f"chess-opening:{seed}")
    for _ in range(MAX_DRAWS):
        moves, board = _random_plies(rng, rng.randint(0, plies) if split == "train" else plies)
        if position_share(board) == split:
            return moves
    raise ValueError(
        f"no opening of {plies} plies in the {split} split's share of positions after {MAX_DRAWS} draws (seed "
        f"{seed}); raise env.chess.opening_plies (4, the default, gives each split thousands)"
    )


def _random_plies(rng: random.Random, plies: int) -> tuple[list[str], chess.Board]:
    board, moves = chess.Board(), []
    for _ in range(plies):
        options = sorted(board.legal_moves, key=chess.Move.uci)
        move = rng.choice(options)
        if _ends(
            board, move
        ):  # rare (a mate in the first plies): checked on the drawn move alone, as it is dear
            move = rng.choice([m for m in options if not _ends(board, m)])
        board.push(move)
        moves.append(move.uci())
    return moves, board


def _ends(board: chess.Board, move: chess.Move) -> bool:
    board.push(move)
    try:
        return board.is_game_over()
    finally:
        board.pop()


def distinct_split_specs(env: OpeningSplits, split: str) -> list[dict]:
    """An eval or test split's specs from its seed range, strata round-robin, no two starting at one position;
    ValueError when the split is larger than its share's distinct openings allow."""
    low, high = SPLIT_SEEDS[split]
    rng, size = random.Random(f"{env.seed}:{split}"), env.sizes[split]
    seen_seeds, seen_positions, specs = set(), set(), []
    for _ in range(size * SPLIT_DRAWS):
        if len(specs) == size:
            break
        seed = rng.randrange(low, high)
        if seed in seen_seeds:
            continue
        seen_seeds.add(seed)
        spec = env.make_spec(seed, len(specs) % env.num_groups)
        key = position_key(opening_board(spec["start_moves"]))
        if key not in seen_positions:
            seen_positions.add(key)
            specs.append(spec)
    if len(specs) < size:
        raise ValueError(
            f"the {split} split found {len(specs)} distinct opening positions of its share for its {size} "
            f"games in {size * SPLIT_DRAWS} draws; raise env.chess.opening_plies or lower the split's size"
        )
    return specs
