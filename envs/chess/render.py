"""What the model reads and writes: a position as text (FEN or an 8x8 board), the legal moves, and moves in UCI or
SAN; and the reverse, a position read back from a user message (the embedded teacher reads only the conversation)."""

from __future__ import annotations

import re

import chess

SYSTEM_PROMPTS = {
    "uci": "You play chess. Reply with one legal move in UCI notation inside <move></move>, e.g. <move>e2e4</move>.",
    "san": "You play chess. Reply with one legal move in SAN inside <move></move>, e.g. <move>Nf3</move>.",
}
STATUS = {
    "start": "You play {color}. Your move.",
    "opponent": "{opponent} played {move}. Your move.",
    "illegal": "{move} is not a legal move here. Your move.",
    "format": "Reply with one move inside <move></move>. Your move.",
}
FEN_LINE = re.compile(r"^FEN: (\S+ [wb] \S+ \S+(?: \d+ \d+)?)$", re.MULTILINE)
BOARD_LINE = re.compile(r"^([1-8]) ((?:[.pnbrqkPNBRQK] ){7}[.pnbrqkPNBRQK])$", re.MULTILINE)
RIGHTS_LINE = re.compile(r"^(White|Black) to move\. Castling: (\S+)\. En passant: (\S+)\.$", re.MULTILINE)
LONGEST_MOVE_TEXT = 24  # characters of a reply's move quoted back in an illegal-move status


def color_name(color: chess.Color) -> str:
    """'white' or 'black'."""
    return "white" if color == chess.WHITE else "black"


def move_text(board: chess.Board, move: chess.Move, reply_format: str) -> str:
    """A legal move as the reply format writes it."""
    return move.uci() if reply_format == "uci" else board.san(move)


def read_move(board: chess.Board, text: str | None, reply_format: str) -> chess.Move | None:
    """The legal move `text` names at `board` in the reply format; None for no move, an unreadable or illegal one."""
    if not text:
        return None
    text = text.strip()
    if reply_format == "uci":  # one spelling per move: python-chess would also take king-takes-rook castling
        return next((m for m in board.legal_moves if m.uci() == text), None)
    try:
        move = board.parse_san(text)
    except (
        ValueError
    ):  # python-chess's parse errors (InvalidMoveError, IllegalMoveError, ...) are ValueErrors
        return None
    return move if move in board.legal_moves else None


def position_text(board: chess.Board, rendering: str) -> str:
    """The position: its FEN line, or an 8x8 board (rank 8 first) and the side to move with its rights."""
    if rendering == "fen":
        return f"FEN: {board.fen()}"
    rows = [f"{8 - r} " + " ".join(str(board).splitlines()[r].split()) for r in range(8)]
    fen = board.fen().split()
    side = "White" if board.turn == chess.WHITE else "Black"
    return "\n".join(
        ["  a b c d e f g h", *rows, f"{side} to move. Castling: {fen[2]}. En passant: {fen[3]}."]
    )


def user_message(status: str, board: chess.Board, rendering: str, reply_format: str, legal: bool) -> str:
    """One turn's user message: what happened, the position and, with `legal`, the legal moves."""
    lines = [status, position_text(board, rendering)]
    if legal:
        moves = sorted(move_text(board, m, reply_format) for m in board.legal_moves)
        # On a line of their own, comma-separated: a byte-level BPE then splits each listed move into the same
        # tokens as the move after `<move>` (a space before it would start another token: `Ġe` vs `e`), so a reply
        # can copy it token for token (docs/experiments/chess.md#rendering-the-legal-moves).
        lines += ["Legal moves:", ",".join(moves)]
    return "\n".join(lines)


def parse_position(text: str) -> chess.Board | None:
    """The position a user message shows (either rendering); None when it shows none."""
    found = FEN_LINE.search(text)
    if found:
        try:
            return chess.Board(found.group(1))
        except ValueError:
            return None
    ranks = {int(m.group(1)): m.group(2).split() for m in BOARD_LINE.finditer(text)}
    rights = RIGHTS_LINE.search(text)
    if sorted(ranks) != list(range(1, 9)) or rights is None:
        return None
    placement = "/".join(_fen_rank(ranks[r]) for r in range(8, 0, -1))
    side, castling, en_passant = rights.groups()
    try:
        return chess.Board(f"{placement} {side[0].lower()} {castling} {en_passant} 0 1")
    except ValueError:
        return None


def _fen_rank(squares: list[str]) -> str:
    out, empty = "", 0
    for square in squares:
        if square == ".":
            empty += 1
            continue
        out += (str(empty) if empty else "") + square
        empty = 0
    return out + (str(empty) if empty else "")
