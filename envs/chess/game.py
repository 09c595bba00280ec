"""The game: the model plays one colour against Stockfish that slips to random moves; rules, specs and rubric.

The rules are python-chess's: legality, check, mate, stalemate, repetition and the fifty-move rule (claimed at once).
A game still running after `max_turns` model turns is adjudicated by the engine (`adjudicate`), unless the model's
last reply was illegal: then it is lost ("forfeit"), so a model that never plays a legal move never draws. Every move of the
model is judged against the engine's best move at `judge_nodes` (its centipawn loss), a deeper search than the
opponent's and the teacher's, so the judge measures play, not the distance from the teacher; those judgements are
the env's, never the agent's (`private_state_keys`).
"""

from __future__ import annotations

import random

import chess

from envs.chess.chess_config import ChessConfig
from envs.chess.engine import MATE_CP, EnginePool
from envs.chess.openings import distinct_split_specs, opening_moves
from envs.chess.players import choose_move
from envs.chess.render import (
    LONGEST_MOVE_TEXT,
    STATUS,
    SYSTEM_PROMPTS,
    color_name,
    move_text,
    read_move,
    user_message,
)
from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.core.game_outcome import draw, loss, outcome, win
from wander.core.parser import XMLParser
from wander.core.policy import Message
from wander.core.rubric import Rubric
from wander.core.splits import SeededSplits

CP_CAP = 1000
"""Centipawns at which one move's loss is capped (a lost queen and a missed mate weigh alike), as lichess does."""


def adjudicate(model_cp: int, threshold: int) -> str:
    """A game stopped at `max_turns`: won at an engine evaluation of at least `threshold` centipawns for the model,
    lost at most `-threshold`, drawn in between."""
    return "win" if model_cp >= threshold else "loss" if model_cp <= -threshold else "draw"


class ChessGame(SeededSplits, Environment):
    """Multi-turn chess; an illegal or unreadable reply is re-prompted on the same position and counted."""

    # What the agent may not see: the engine's judgement of its moves and of the final position.
    private_spec_keys = frozenset()
    private_state_keys = frozenset({"cp_losses", "blunder_moves", "final_eval"})
    # A step waits on engine searches: a batch's steps run on threads, as many at once as the pool has engines
    # (32 games of the teacher: 13.2 -> 9.7 s with 2 engines on 2 cores).
    steps_block = True

    def __init__(self, config: ChessConfig):
        self.config = config
        parser = XMLParser(("move",), answer_field="move")
        rubric = Rubric(parser=parser)
        rubric.add(outcome, config.outcome_weight)
        rubric.add(parser.format_reward, config.format_weight, name="format")
        rubric.add(move_quality, config.quality_weight)
        rubric.add(illegal_moves, config.illegal_penalty)
        for metric in (
            win,
            draw,
            loss,
            any_illegal,
            legal_rate,
            acpl,
            blunders,
            no_blunders,
            turns,
            adjudicated,
        ):
            rubric.add(metric, 0.0)
        super().__init__(
            rubric=rubric,
            parser=parser,
            system_prompt=SYSTEM_PROMPTS[config.reply_format],
            max_turns=config.max_turns,
            name="chess",
        )
        self.full_history = False  # a turn reads the current position: it holds everything the game needs
        self.pool = EnginePool(config.engine_path, config.engines)
        self.init_splits(
            config.num_train,
            config.num_eval,
            config.num_test,
            config.seed,
            config.num_groups,
            config.specs_dir,
        )

    def close(self) -> None:
        """Quit the env's engines (a later game starts them again)."""
        self.pool.close()

    # ----- data -----

    def spec_fields(self, seed: int, stratum: int) -> dict:
        """The opponent's random-move probability within the stratum's bin, the model's colour and the opening (in
        the seed's split's share of positions: envs/chess/openings.py)."""
        rng = random.Random(f"chess-spec:{seed}")
        low, high = self.config.random_move_prob
        width = (high - low) / self.num_groups
        return {
            "random_move_prob": round(low + (stratum + rng.random()) * width, 6),
            "model_white": rng.random() < 0.5,
            "start_moves": opening_moves(seed, self.config.opening_plies),
        }

    def split_specs(self, split: str) -> list[dict]:
        """Train as `SeededSplits` draws it; eval and test without two games from one opening position
        (envs/chess/openings.py); the generate stage's specs as written when `specs_dir` is set."""
        if self.specs_dir is not None or split == "train":
            return super().split_specs(split)
        return distinct_split_specs(self, split)

    # ----- episodes -----

    def setup_state(self, spec: dict) -> dict:
        """The opening played out; the opponent moves first when the side to move is not the model's."""
        state = {
            "seed": int(spec["seed"]),
            "random_move_prob": float(spec["random_move_prob"]),
            "color": "white" if spec["model_white"] else "black",
            "moves": list(spec.get("start_moves") or ()),
            "illegal": 0,
            "model_moves": 0,
            "blunder_moves": 0,
            "cp_losses": [],
            "final_eval": None,
            "outcome": None,
            "ending": None,
            "opening": None,
            "forced_replies": list(spec.get("forced_replies", ())),  # the opponent's next moves, when forced
        }
        board = self.board_of(state)
        if color_name(board.turn) != state["color"]:
            state["opening"] = self._opponent_plays(board, state)
        state["fen"] = board.fen()
        return state

    def board_of(self, state: dict) -> chess.Board:
        """The game's board with its move stack (repetitions count), from the initial position and the moves."""
        board = chess.Board()
        for uci in state["moves"]:
            board.push_uci(uci)
        return board

    def initial_messages(self, spec: dict, state: dict) -> list[Message]:
        """The rules, then the first position (after the opponent's first move when it has one)."""
        board = self.board_of(state)
        status = STATUS["start"].format(color=state["color"])
        if state["opening"] is not None:
            status += " " + self._opponent_status(board)
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self._message(status, board)},
        ]

    def observation(self, episode: Episode) -> list[Message]:
        """The system prompt and the latest user message: the current position holds the whole game."""
        return episode.messages[:1] + episode.messages[-1:]

    def env_response(self, messages: list[Message], state: dict) -> list[Message]:
        """Judge and play the model's move, then the opponent's; re-prompt on an illegal or unreadable reply."""
        board = self.board_of(state)
        raw = self.parser.parse_answer(messages)
        move = read_move(board, raw, self.config.reply_format)
        if move is None:
            state["illegal"] += 1
            status = (
                STATUS["format"]
                if raw is None
                else STATUS["illegal"].format(move=raw.strip()[:LONGEST_MOVE_TEXT])
            )
        else:
            self._judge(board, move, state)
            board.push(move)
            state["moves"].append(move.uci())
            state["model_moves"] += 1
            if self._finished(board, state):
                return []
        if state["turn"] >= self.max_turns:
            self._adjudicate(board, state)
            return []
        if move is not None:
            self._opponent_plays(board, state)
            if self._finished(board, state):
                return []
            status = self._opponent_status(board)
        return [{"role": "user", "content": self._message(status, board)}]

    def _message(self, status: str, board: chess.Board) -> str:
        c = self.config
        return user_message(status, board, c.rendering, c.reply_format, c.legal_moves)

    def _opponent_status(self, board: chess.Board) -> str:
        """What the opponent's last move (on top of `board`'s stack) was, in the reply format."""
        move = board.pop()
        try:
            return STATUS["opponent"].format(
                opponent=color_name(board.turn).capitalize(),
                move=move_text(board, move, self.config.reply_format),
            )
        finally:
            board.push(move)

    def _opponent_plays(self, board: chess.Board, state: dict) -> str:
        forced = state.get("forced_replies")
        if forced:  # a person playing the opponent in `wander ui` (a move in the reply format)
            text = forced.pop(0)
            move = read_move(board, text, self.config.reply_format)
            if move is None:
                raise ValueError(f"forced opponent move {text!r} is not legal at {board.fen()}")
        else:
            move = choose_move(
                board, self.pool, self.config.opponent_nodes, state["random_move_prob"], state["seed"]
            )
        board.push(move)
        state["moves"].append(move.uci())
        return move.uci()

    def _judge(self, board: chess.Board, move: chess.Move, state: dict) -> None:
        """The move's centipawn loss against the engine's best at `judge_nodes` (0 when it is that move)."""
        fen, nodes = board.fen(), self.config.judge_nodes
        best, best_cp = self.pool.best(fen, nodes)
        loss = 0 if move.uci() == best else max(0, best_cp - self.pool.score_of(fen, move.uci(), nodes))
        state["cp_losses"].append(min(loss, CP_CAP))
        state["blunder_moves"] += loss >= self.config.blunder_cp

    def _finished(self, board: chess.Board, state: dict) -> bool:
        state["fen"] = board.fen()  # after every move: the position the agent's public state shows
        result = board.outcome(claim_draw=True)
        if result is None:
            return False
        mine = chess.WHITE if state["color"] == "white" else chess.BLACK
        state["outcome"] = "draw" if result.winner is None else ("win" if result.winner == mine else "loss")
        state["ending"] = result.termination.name.lower()
        state["done"] = True
        return True

    def _adjudicate(self, board: chess.Board, state: dict) -> None:
        if (
            color_name(board.turn) == state["color"]
        ):  # out of turns on an illegal reply: never a draw for free
            state["outcome"], state["ending"], state["done"] = "loss", "forfeit", True
            return
        cp = self.pool.best(board.fen(), self.config.judge_nodes)[1]  # for the side to move
        model_cp = cp if color_name(board.turn) == state["color"] else -cp
        state["final_eval"] = max(-MATE_CP, min(MATE_CP, model_cp))
        state["outcome"] = adjudicate(model_cp, self.config.adjudicate_cp)
        state["ending"] = "adjudicated"
        state["done"] = True


# ----- rubric functions: each receives only what it declares -----


def move_quality(state: dict) -> float:
    """Mean over the model's moves of 1 - centipawn loss / 1000 (each loss capped at 1000); 0 with no move."""
    losses = state["cp_losses"]
    return sum(1.0 - c / CP_CAP for c in losses) / len(losses) if losses else 0.0


def illegal_moves(state: dict) -> float:
    """Illegal or unreadable replies in the game."""
    return float(state["illegal"])


def any_illegal(state: dict) -> float:
    """1 when the game had an illegal or unreadable reply."""
    return float(state["illegal"] > 0)


def legal_rate(state: dict) -> float:
    """Share of the model's replies that were legal moves."""
    return state["model_moves"] / state["turn"] if state["turn"] else 0.0


def acpl(state: dict) -> float:
    """Mean centipawn loss of the model's moves (each capped at 1000); 1000 with no move."""
    losses = state["cp_losses"]
    return sum(losses) / len(losses) if losses else float(CP_CAP)


def blunders(state: dict) -> float:
    """The model's moves that lost at least `blunder_cp` centipawns against the engine's best."""
    return float(state["blunder_moves"])


def no_blunders(state: dict) -> float:
    """1 when none of the model's moves was a blunder (what curation keeps)."""
    return float(state["blunder_moves"] == 0)


def turns(state: dict) -> float:
    """Model turns used."""
    return float(state["turn"])


def adjudicated(state: dict) -> float:
    """1 when the game reached `max_turns` and the engine's evaluation decided it (a forfeit is not adjudicated)."""
    return float(state["ending"] == "adjudicated")
