"""Settings of the tic-tac-toe environment, with the case study's defaults."""

from __future__ import annotations

from dataclasses import dataclass

from envs.tictactoe.render import RENDERINGS

# Disjoint seed ranges keep splits apart whatever their sizes: eval stays frozen when train grows.
SPLIT_SEED_RANGES = {
    "train": (0, 700_000_000),
    "eval": (700_000_000, 1_400_000_000),
    "test": (1_400_000_000, 2_100_000_000),
}


@dataclass
class TicTacToeConfig:
    """Everything that defines a tic-tac-toe task; `load_environment(**kwargs)` takes these fields."""

    rendering: str = "board"
    """Board text: "board" (the board with free cells numbered, `01X/3O5/678`, then the mark; no system prompt:
    the shortest, for scratch models), "spaced" (`board` with a space between cells and a row per line: every
    cell its own token in a pretrained BPE tokenizer), "lines" (`board`'s rows, then its columns and diagonals,
    each line three adjacent cells: for chat models), "compact" (a one-line rule, the board and the free cells)
    or "grid" (readable by any chat LLM)."""

    reply_format: str = "move"
    """What the model answers: "move" (`<move>N</move>` alone: the decision is the whole reply, for tiny
    models) or "think" (`<think>reason</think><move>N</move>`, for chat models that reason first)."""

    system_prompt: str | None = None
    """The system message; None = the rendering's own (board has none, so a chat model's template inserts its
    default: SmolLM2's costs 16 tokens a decision, a short task line ~5)."""

    history: str = "current"
    """What the model reads each turn: "full" (the whole game so far) or "current" (the system prompt and the
    latest user message alone: the current board, the opponent's last move or why the last reply was invalid)."""

    max_turns: int = 8
    """Model turns per game, invalid ones included; a game still running after them is a loss."""

    random_move_prob: tuple[float, float] = (0.0, 1.0)
    """Range of the opponent's random-move probability (0 = perfect minimax, 1 = random)."""

    num_groups: int = 4
    """Difficulty strata: the range above is cut into this many equal bins, balanced in every split."""

    num_train: int = 2000
    """Episodes in the train split."""

    num_eval: int = 200
    """Episodes in the eval split (frozen: independent of num_train)."""

    num_test: int = 200
    """Episodes in the test split."""

    seed: int = 0
    """Split seed: decides every episode seed and opponent skill of the splits."""

    midgame_starts: float = 0.0
    """Share of train-split episodes that start from a mid-game position instead of the empty board: one of the
    4,519 reachable live positions, drawn uniformly from the episode seed; the model plays the side to move. Teacher games and
    GRPO then reach positions that good play from the empty board rarely does (an opponent's blunder, a missed
    win). Eval and test episodes always start from the empty board."""

    specs_dir: str | None = None
    """Folder of `<split>.jsonl` episode specs (as the pipeline's generate stage writes them). When set, each
    split's seeds and strata come from there (the sizes and seed above are unused), and the opponent's skill is drawn
    within this config's `random_move_prob`, so a curriculum stage's range applies to the same episodes."""

    outcome_weight: float = 1.0
    """Weight of the outcome reward (win 1, draw 0.5, loss 0)."""

    format_weight: float = 0.2
    """Weight of the format reward (share of well-formed replies)."""

    invalid_penalty: float = -0.1
    """Added per invalid move, so every further invalid move costs more (not once per game)."""

    value_loss_penalty: float = 0.0
    """Added per valid model move that loses the minimax value of its position (the solver's verdict): shaping,
    so 0 keeps the reward the game's outcome alone. The `value_losing_moves` metric is scored only when set."""

    def __post_init__(self) -> None:
        low, high = self.random_move_prob = tuple(float(x) for x in self.random_move_prob)
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"random_move_prob must be a range (low, high) within [0, 1], got {(low, high)}")
        if self.rendering not in RENDERINGS:
            raise ValueError(f"rendering must be one of {', '.join(RENDERINGS)}, got {self.rendering!r}")
        if self.reply_format not in ("move", "think"):
            raise ValueError(f"reply_format must be 'move' or 'think', got {self.reply_format!r}")
        if self.history not in ("full", "current"):
            raise ValueError(f"history must be 'full' or 'current', got {self.history!r}")
        if self.max_turns < 1 or self.num_groups < 1:
            raise ValueError("max_turns and num_groups must be at least 1")
        if not 0.0 <= self.midgame_starts <= 1.0:
            raise ValueError(f"midgame_starts must be a share within [0, 1], got {self.midgame_starts}")
        if min(self.num_train, self.num_eval, self.num_test) < 0:
            raise ValueError("split sizes must not be negative")
