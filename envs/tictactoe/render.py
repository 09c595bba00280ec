"""What the model reads: system prompts, status lines and three board renderings.

`grid` is for any chat LLM (numbered empty cells, ASCII lines); `compact` is short, for tiny models; `board` is
the shortest (no system prompt, the board with free cells numbered, then the model's mark): a scratch model
trains on about 30 tokens a move instead of 80; `spaced` is `board` with a space between cells and a line per row,
so a pretrained BPE tokenizer gives every cell a token of its own (`board`'s `XX` and `OO` are one token there);
`lines` is `board`'s rows, then its columns and diagonals, each line three adjacent cells (the chat profile's).
All read back with `parse_board`, so scripted players and the teacher server see the same text a model does.
"""

from __future__ import annotations

import re
from functools import cache

from envs.tictactoe.board import legal_moves

RENDERINGS = ("grid", "compact", "board", "spaced", "lines")
MARK_LAST = ("board", "spaced", "lines")  # renderings that show the board first and the model's mark last

SYSTEM_PROMPTS = {
    ("grid", "think"): (
        "You are playing tic-tac-toe against an opponent. The board has cells 0-8, row by row:\n"
        " 0 | 1 | 2\n 3 | 4 | 5\n 6 | 7 | 8\n"
        "X moves first. Get three of your marks in a row, column or diagonal to win.\n"
        "Each turn, you may think briefly inside <think>...</think>, then give exactly one "
        "empty cell inside <move>...</move>, for example <move>4</move>."
    ),
    ("grid", "move"): (
        "You are playing tic-tac-toe against an opponent. The board has cells 0-8, row by row:\n"
        " 0 | 1 | 2\n 3 | 4 | 5\n 6 | 7 | 8\n"
        "X moves first. Get three of your marks in a row, column or diagonal to win.\n"
        "Each turn, answer with exactly one empty cell inside <move>...</move>, for example <move>4</move>."
    ),
    ("compact", "think"): "Tic-tac-toe, cells 0-8 row by row. Answer <think>...</think><move>N</move>.",
    ("compact", "move"): "Tic-tac-toe, cells 0-8 row by row. Answer <move>N</move>.",
    ("board", "think"): "Answer <think>...</think><move>N</move>.",
    ("board", "move"): "",
}

# Every status line names the model's mark, so a model that reads only the current turn knows its side.
STATUS = {
    "grid": {
        "start": "Game started. You are {mark} and you move first.",
        "start_second": "Game started. You are {mark}. The opponent played at {cell}.",
        "opponent": "You are {mark}. The opponent played at {cell}.",
        "taken": "You are {mark}. Invalid move: cell {cell} is already taken. Choose an empty cell.",
        "range": "You are {mark}. Invalid move: {cell} is not a cell from 0 to 8.",
        "format": "You are {mark}. Please answer with your move inside tags, for example <move>4</move>.",
    },
    "compact": {
        "start": "You {mark}, first.",
        "start_second": "You {mark}. Opp {cell}.",
        "opponent": "You {mark}. Opp {cell}.",
        "taken": "You {mark}. Invalid: {cell} taken.",
        "range": "You {mark}. Invalid: {cell} not 0-8.",
        "format": "You {mark}. Invalid: use <move>N</move>.",
    },
    "board": {
        "start": "{mark}",
        "start_second": "{mark}",
        "opponent": "{mark}",
        "taken": "{mark} taken {cell}",
        "range": "{mark} bad {cell}",
        "format": "{mark} bad",
    },
}
for _rendering in MARK_LAST[1:]:  # the other board-first renderings read like `board`
    STATUS[_rendering] = STATUS["board"]
    SYSTEM_PROMPTS.update({(_rendering, f): SYSTEM_PROMPTS["board", f] for f in ("think", "move")})


@cache
def render_board(board: str, rendering: str) -> str:
    """The board and the available cells, in one rendering."""
    moves = legal_moves(board)
    # Free cells shown by their number (grid, board): a model reads the legal moves off the tokens it answers with.
    cells = "".join(c if c != "." else str(i) for i, c in enumerate(board))
    if rendering == "grid":
        rows = [f" {cells[r]} | {cells[r + 1]} | {cells[r + 2]}" for r in (0, 3, 6)]
        grid = "\n---+---+---\n".join(rows)
        return f"Board:\n{grid}\nAvailable: {', '.join(map(str, moves))}"
    if rendering == "compact":
        return f"{board[:3]}/{board[3:6]}/{board[6:]}\nmoves {''.join(map(str, moves))}"
    numbered = f"{cells[:3]}/{cells[3:6]}/{cells[6:]}"  # the rows, free cells by number
    if rendering == "board":  # measured: a tiny model learns much faster from numbered cells than from '.'
        return numbered
    if rendering == "spaced":
        return "\n".join(" ".join(cells[r : r + 3]) for r in (0, 3, 6))
    if rendering == "lines":
        # The rows, then the columns and the diagonals: every line three adjacent cells (measured: a chat model errs
        # on half as many positions as with `board`, whose columns and diagonals lie 4-8 tokens apart).
        columns = "/".join(cells[c::3] for c in range(3))
        return f"{numbered}\n{columns}\n{cells[0::4]}/{cells[2:7:2]}"
    raise ValueError(f"unknown rendering {rendering!r}; choose one of {RENDERINGS}")


def reply_text(cell: int, reason: str | None = None) -> str:
    """A model reply playing `cell`: the move alone, or after a `<think>` reason when one is given."""
    return f"<move>{cell}</move>" if reason is None else f"<think>{reason}</think>\n<move>{cell}</move>"


def user_message(status: str, board: str, rendering: str) -> str:
    """A full user turn: status line, then the board and available cells (MARK_LAST: the board, then the status)."""
    if rendering in MARK_LAST:  # the mark next to the reply: the token the move is predicted from
        return f"{render_board(board, rendering)}\n{status}"
    return f"{status}\n{render_board(board, rendering)}"


_GRID_ROW = r" (.) \| (.) \| (.)"
_GRID = re.compile(rf"{_GRID_ROW}\n---\+---\+---\n{_GRID_ROW}\n---\+---\+---\n{_GRID_ROW}")
_COMPACT = re.compile(r"(?m)^([XO.0-8]{3})/([XO.0-8]{3})/([XO.0-8]{3})$")  # compact or board
_SPACED_ROW = r"([XO0-8]) ([XO0-8]) ([XO0-8])"
_SPACED = re.compile(rf"(?m)^{_SPACED_ROW}\n{_SPACED_ROW}\n{_SPACED_ROW}$")


def parse_board(text: str) -> str | None:
    """The board shown in a user message (either rendering), or None if there is none."""
    m = _GRID.search(text)
    if m:
        return "".join(c if c in "XO" else "." for c in m.groups())
    m = _COMPACT.search(text) or _SPACED.search(text)
    if m is None:
        return None
    board = "".join(m.groups())
    # A digit is a free cell only where it names itself: anything else is not a board this env rendered.
    if any(c.isdigit() and int(c) != i for i, c in enumerate(board)):
        return None
    return "".join(c if c in "XO" else "." for c in board)
