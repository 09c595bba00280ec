"""The game: the model plays X or O against minimax with skill; its rules, specs, rubric and prompts."""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Iterator
from pathlib import Path

from envs.tictactoe.board import (
    EMPTY_BOARD,
    OPTIMAL_MOVES,
    STATES,
    is_over,
    legal_moves,
    opponent_move,
    play,
    splitmix64,
    to_move,
    winner,
)
from envs.tictactoe.players import ExpertPlayer, rationale
from envs.tictactoe.render import STATUS, SYSTEM_PROMPTS, reply_text, user_message
from envs.tictactoe.tictactoe_config import SPLIT_SEED_RANGES, TicTacToeConfig
from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.core.game_outcome import draw, loss, outcome, win
from wander.core.parser import XMLParser
from wander.core.policy import Message
from wander.core.rubric import Rubric

CELLS = {str(c): c for c in range(9)}
CURVE_OPPONENTS = {"minimax-0": 0.0, "random": 1.0}


def model_starts(seed: int) -> bool:
    """Whether the model moves first (plays X): decided by the episode seed alone."""
    return splitmix64(seed ^ 0x5DEECE66D) >> 63 == 1


@functools.cache
def live_positions() -> tuple[tuple[int, ...], ...]:
    """One ply sequence per distinct reachable position that is neither empty nor over (4,519), in search order."""
    found: dict[str, tuple[int, ...]] = {}
    stack: list[tuple[str, tuple[int, ...]]] = [(EMPTY_BOARD, ())]
    while stack:
        board, moves = stack.pop()
        for cell in legal_moves(board):
            after = play(board, cell, "XO"[len(moves) % 2])
            if not is_over(after) and after not in found:
                found[after] = (*moves, cell)
                stack.append((after, found[after]))
    return tuple(found.values())


def midgame_moves(seed: int) -> list[int]:
    """The plies to a live position drawn uniformly from the seed: every position alike, deep ones included."""
    positions = live_positions()
    return list(positions[splitmix64(seed ^ 0x3C6EF372) % len(positions)])


class TicTacToeGame(Environment):
    """Multi-turn tic-tac-toe; invalid moves are re-prompted on the same board and counted. What the solver adds
    (exact curves, decision branching) and the pipeline's answers come on top of it, in env.py."""

    # The settings that decide how an episode plays out from its spec and replies. The others choose the specs
    # (splits, opponent range, strata) or weight the rubric: a client of a served copy does those on its side.
    episode_settings = ("rendering", "reply_format", "history", "max_turns")
    # Nothing hidden: a game of perfect information. The seed that draws the opponent's random moves stays public,
    # because `reset(seed=...)` replays an episode by it.
    private_spec_keys = frozenset()
    private_state_keys = frozenset()

    def __init__(self, config: TicTacToeConfig):
        self.config = config
        parser = XMLParser(("think", "move"), answer_field="move")
        rubric = Rubric(parser=parser)
        rubric.add(outcome, config.outcome_weight)
        rubric.add(parser.format_reward, config.format_weight, name="format")
        rubric.add(invalid_moves, config.invalid_penalty)
        if config.value_loss_penalty:
            rubric.add(value_losing_moves, config.value_loss_penalty)
        for metric in (win, draw, loss, any_invalid, turns, move_optimality):
            rubric.add(metric, 0.0)
        super().__init__(
            dataset=None,
            rubric=rubric,
            parser=parser,
            system_prompt=(
                SYSTEM_PROMPTS[config.rendering, config.reply_format]
                if config.system_prompt is None
                else config.system_prompt
            ),
            max_turns=config.max_turns,
            name="tictactoe",
        )
        self.status = STATUS[config.rendering]
        self.full_history = config.history == "full"  # GRPO trains whole games, else one decision per sample
        self._splits: dict = {}

    # ----- data -----

    def make_spec(self, seed: int, stratum: int | None = None) -> dict:
        """Episode spec for a seed: opponent skill drawn within its stratum, starter from the seed."""
        h = splitmix64(seed)
        groups = self.config.num_groups
        stratum = h % groups if stratum is None else stratum
        low, high = self.config.random_move_prob
        width = (high - low) / groups
        p = round(low + (stratum + (h >> 11) / 2**53) * width, 6)
        return {
            "seed": seed,
            "random_move_prob": p,
            "stratum": stratum,
            "model_starts": model_starts(seed),
            "start_moves": [],
        }

    def train_spec(self, seed: int, stratum: int) -> dict:
        """A train-split spec: with probability `midgame_starts` (from the seed) it starts mid-game."""
        spec = self.make_spec(seed, stratum)
        if splitmix64(seed ^ 0x1B873593) / 2**64 < self.config.midgame_starts:
            moves = midgame_moves(seed)
            spec.update(start_moves=moves, model_starts=len(moves) % 2 == 0)
        return spec

    def split_specs(self, split: str) -> list[dict]:
        """The specs of a split: unique seeds from the split seed (or `specs_dir`), strata round-robin."""
        if self.config.specs_dir is not None:
            path = Path(self.config.specs_dir) / f"{split}.jsonl"
            if not path.exists():
                raise FileNotFoundError(f"no episode specs at {path} (specs_dir of the tictactoe config)")
            rows = [
                json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
            ]
            if any(not 0 <= r["stratum"] < self.config.num_groups for r in rows):
                raise ValueError(
                    f"{path} has strata outside 0..{self.config.num_groups - 1} (num_groups differs)"
                )
            return [self._split_spec(split, int(r["seed"]), int(r["stratum"])) for r in rows]
        size = {"train": self.config.num_train, "eval": self.config.num_eval, "test": self.config.num_test}[
            split
        ]
        low, high = SPLIT_SEED_RANGES[split]
        seeds = random.Random(f"{self.config.seed}:{split}").sample(range(low, high), size)
        return [self._split_spec(split, s, i % self.config.num_groups) for i, s in enumerate(seeds)]

    def _split_spec(self, split: str, seed: int, stratum: int) -> dict:
        return self.train_spec(seed, stratum) if split == "train" else self.make_spec(seed, stratum)

    def get_dataset(self, split: str = "train"):
        """A `datasets.Dataset` of episode specs, built on first use."""
        if split not in SPLIT_SEED_RANGES:
            raise KeyError(f"tictactoe has no split {split!r}; available: {sorted(SPLIT_SEED_RANGES)}")
        if split not in self._splits:
            from datasets import Dataset  # lazy: the game API needs no datasets

            self._splits[split] = Dataset.from_list(self.split_specs(split))
        return self._splits[split]

    @property
    def dataset(self) -> dict:
        """All three splits."""
        return {s: self.get_dataset(s) for s in SPLIT_SEED_RANGES}

    @dataset.setter
    def dataset(self, value: object) -> None:
        pass  # splits are derived from the config, never assigned

    # ----- episodes -----

    def setup_state(self, spec: dict) -> dict:
        """Fresh board (or the spec's mid-game start); the opponent moves first when the model does not start."""
        board = EMPTY_BOARD
        for ply, cell in enumerate(spec.get("start_moves") or ()):
            board = play(board, cell, "XO"[ply % 2])
        first = bool(spec["model_starts"])
        state = {
            "seed": int(spec["seed"]),
            "random_move_prob": float(spec["random_move_prob"]),
            "mark": to_move(board) if board != EMPTY_BOARD else ("X" if first else "O"),
            "board": board,
            "invalid": 0,
            "model_moves": 0,
            "optimal": 0,
            "outcome": None,
            "opening": None,
            "forced_replies": list(spec.get("forced_replies", ())),
        }
        if board == EMPTY_BOARD and not first:
            state["opening"] = self._opponent_plays(state)
        return state

    def initial_messages(self, spec: dict, state: dict) -> list[Message]:
        """System rules and the first board."""
        if spec.get("start_moves"):  # mid-game: the opponent made the last move
            status = self.status["opponent"].format(cell=spec["start_moves"][-1], mark=state["mark"])
        elif state["opening"] is None:
            status = self.status["start"].format(mark=state["mark"])
        else:
            status = self.status["start_second"].format(mark=state["mark"], cell=state["opening"])
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return system + [
            {"role": "user", "content": user_message(status, state["board"], self.config.rendering)}
        ]

    def observation(self, episode: Episode) -> list[Message]:
        """The whole game, or with `history="current"` the system prompt and the latest user message."""
        if self.config.history == "full":
            return episode.messages
        system = episode.messages[:1] if episode.messages[0]["role"] == "system" else []
        return system + episode.messages[-1:]

    def env_response(self, messages: list[Message], state: dict) -> list[Message]:
        """Apply the model's move (even on its last turn), then the opponent's; re-prompt if invalid."""
        raw = self.parser.parse_answer(messages)
        board = state["board"]
        cell = CELLS.get(raw)
        status = (
            None
            if cell is not None and board[cell] == "."
            else self._invalid_status(raw, board, state["mark"])
        )
        if status is None:
            state["model_moves"] += 1
            state["optimal"] += cell in OPTIMAL_MOVES[board]
            state["board"] = board[:cell] + state["mark"] + board[cell + 1 :]
            if self._finished(state):
                return []
        else:
            state["invalid"] += 1
        if state["turn"] >= self.max_turns:
            state["outcome"], state["done"] = "loss", True  # out of turns
            return []
        if status is None:
            cell = self._opponent_plays(state)
            if self._finished(state):
                return []
            status = self.status["opponent"].format(cell=cell, mark=state["mark"])
        return [{"role": "user", "content": user_message(status, state["board"], self.config.rendering)}]

    def _invalid_status(self, raw: str | None, board: str, mark: str) -> str | None:
        if raw is None:
            return self.status["format"].format(mark=mark)
        # Only the ASCII digits 0-8 name a cell: "04", "４", "²" or a 5,000-digit number is out of range,
        # never a crash (str.isdigit accepts them all, int() refuses some and strips others).
        cell = CELLS.get(raw)
        if cell is None:
            return self.status["range"].format(cell=raw[:20], mark=mark)
        if board[cell] != ".":
            return self.status["taken"].format(cell=raw, mark=mark)
        return None

    def _opponent_plays(self, state: dict) -> int:
        board = state["board"]
        # Exact evaluation branches over the opponent's replies by forcing them (envs/tictactoe/exact.py).
        forced = state.get("forced_replies")
        cell = forced.pop(0) if forced else opponent_move(board, state["seed"], state["random_move_prob"])
        state["opponent_faced"] = board
        state["board"] = board[:cell] + ("O" if state["mark"] == "X" else "X") + board[cell + 1 :]
        return cell

    @staticmethod
    def _finished(state: dict) -> bool:
        won = winner(state["board"])
        if won is None and "." in state["board"]:
            return False
        state["outcome"] = "draw" if won is None else ("win" if won == state["mark"] else "loss")
        state["done"] = True
        return True

    def corpus(self) -> Iterator[str]:
        """System prompt, every user message over all reachable positions, and expert replies."""
        # The system prompt opens every conversation: repeated, so a tokenizer learns it as a few tokens.
        for _ in range(100 if self.system_prompt else 0):
            yield self.system_prompt
        r, s = self.config.rendering, self.status
        for board in STATES:
            moves = legal_moves(board)
            if not moves:
                continue
            mark = to_move(board)
            statuses = [s["start"].format(mark=mark), s["format"].format(mark=mark)]
            statuses += [
                s[k].format(mark=mark, cell=c)
                for k in ("start_second", "opponent", "taken")
                for c in range(9)
            ]
            statuses += [s["range"].format(mark=mark, cell=c) for c in (9, 10, 42)]
            for status in statuses:
                yield user_message(status, board, r)
            for cell in moves:
                yield self.reply_for(board, cell)

    def curve_score(self, values: dict[str, float]) -> float:
        """Wins vs random minus twice every loss (vs random, perfect minimax and an opponent that knows the model:
        the share of sides it is beaten on) and every game with an invalid move: the targets ask for no losses
        first, then as many wins as possible. A point an adversary beats on one side ranks 1.0 below one it does
        not, so `keep_best` keeps an unbeatable model when a stage reaches one."""
        faults = sum(values[f"{o}/{m}"] for o in CURVE_OPPONENTS for m in ("loss", "any_invalid"))
        return values["random/win"] - 2.0 * (faults + values["adversary/loss"])

    def move_of(self, reply: str, board: str) -> int | None:
        """The cell `reply` plays at `board`, read as `env_response` reads it; None for no move, an off-board or a
        taken cell."""
        cell = CELLS.get(self.parser.parse_answer([{"role": "assistant", "content": reply}]))
        return cell if cell is not None and board[cell] == "." else None

    def reply_for(self, board: str, cell: int) -> str:
        """The reply that plays `cell` at `board`, in the env's reply format (with its rationale under "think")."""
        return reply_text(cell, rationale(board, cell) if self.config.reply_format == "think" else None)

    def expert(self, random_move_prob: float = 0.0, seed: int = 0) -> ExpertPlayer:
        """The scripted expert teacher for this env."""
        return ExpertPlayer(random_move_prob=random_move_prob, seed=seed)


# ----- rubric functions: each receives only what it declares -----


def any_invalid(state: dict) -> float:
    """1 when the game had an invalid move."""
    return float(state["invalid"] > 0)


def invalid_moves(state: dict) -> float:
    """Number of invalid moves in the game."""
    return float(state["invalid"])


def turns(state: dict) -> float:
    """Model turns used."""
    return float(state["turn"])


def value_losing_moves(state: dict) -> float:
    """Number of the model's valid moves that lost the minimax value of their position."""
    return float(state["model_moves"] - state["optimal"])


def move_optimality(state: dict) -> float:
    """Share of the model's valid moves that keep the minimax value of their position."""
    return state["optimal"] / state["model_moves"] if state["model_moves"] else 0.0
