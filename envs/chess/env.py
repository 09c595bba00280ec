"""The chess environment: the game (game.py) with the pipeline's answers: its opponent matrix (suite.py), spec
checks, curation by the engine, the embedded teacher and the scripted rows; and the capabilities the engine gives it
(wander/core/capabilities.py): its legal moves as candidate replies, and a reply's value by the engine's evaluation
standing in for a solver's (`best_outcomes`), so GRPO can branch at the model's own mistakes (`branch_at: mistake`)
and value a decision without playing the game on (`play_on: best`).

The modules stack one way: chess_config, engine, openings <- render <- players <- game <- suite <- env.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

import chess

from envs.chess.game import CP_CAP, ChessGame
from envs.chess.players import OPPONENT_PREFIX, EnginePlayer, opponent_skill
from envs.chess.render import STATUS, color_name, move_text, read_move, user_message
from envs.chess.suite import SUITE
from wander.core.capabilities import Branches, Position
from wander.core.episode import Episode
from wander.core.evaluation_suite import EvaluationSuite, matrix_suite_specs
from wander.core.pipeline_hooks import SpecChecks, text_tokens
from wander.core.policy import Policy
from wander.core.splits import SPLIT_SEEDS

SUITE_GAMES = 50
"""Games per cell when `evaluate.games` is null: a win rate's 95% interval is then at most about +-0.14; each game
is up to `max_turns` model moves, each judged by the engine."""
LONGEST_MOVE = {"uci": "e7e8q", "san": "exd8=Q+"}
ELO_SCALE = 400.0  # centipawns over which the expected score moves from 0.5 to 1/(1 + 10^-1) = 0.91


def expected_score(cp: float) -> float:
    """The expected game score (win 1, draw 0.5, loss 0) of a side the engine rates `cp` centipawns ahead: the
    logistic of the Elo scale, 0.5 at 0, 0.76 at +200, 0.85 at +300."""
    return 1.0 / (1.0 + 10.0 ** (-cp / ELO_SCALE))


CORPUS_GAMES = 400  # random games whose positions teach a scratch tokenizer the env's text
CORPUS_PLIES = 40


class ChessEnv(ChessGame):
    """Chess against Stockfish with slips, answering the pipeline."""

    outcomes = ("win", "draw", "loss")
    teacher_skill = 0.05
    """The embedded teacher's slip rate: a random move on one move in twenty, most of them blunders that curation
    drops (docs/experiments/chess.md)."""
    reference_policies = ("random", OPPONENT_PREFIX)
    # The settings that decide how an episode plays out from its spec and replies (a served copy must agree).
    episode_settings = (
        "rendering",
        "legal_moves",
        "reply_format",
        "max_turns",
        "opponent_nodes",
        "judge_nodes",
        "blunder_cp",
        "adjudicate_cp",
    )

    def reply_tokens(self) -> int:
        """The longest move in the reply format, tagged, for any tokenizer."""
        return text_tokens(f"<move>{LONGEST_MOVE[self.config.reply_format]}</move>")

    def evaluation_suite(self) -> EvaluationSuite:
        """Opponents (weakest first) x the model's colour."""
        return SUITE

    def check_suite_groups(self, names: Sequence[str]) -> None:
        """Every name is `random` or `stockfish-<p>` (raises with the accepted forms)."""
        for name in names:
            opponent_skill(name)

    def suite_games(self) -> int:
        """`SUITE_GAMES`: each cell draws fresh test-range seeds, so no split bounds it."""
        return SUITE_GAMES

    def suite_specs(self, groups: Sequence[str], games: int, seed: int) -> list[dict]:
        """The frozen suite: `games` specs per (opponent, colour), cell after cell, from `seed` alone."""
        cells = [
            (o, side, {"random_move_prob": opponent_skill(o), "model_white": side == "white"})
            for o in groups
            for side in SUITE.sides
        ]
        # Seeds of the test range: never a training seed.
        return matrix_suite_specs(self.make_spec, cells, games, seed, SPLIT_SEEDS["test"])

    def spec_checks(self) -> SpecChecks:
        """Seeds, the opponent's random-move probability within the config's range, strata, colour, opening."""
        return SpecChecks(
            columns=("seed", "stratum", "random_move_prob", "model_white", "start_moves"),
            strata=self.num_groups,
            ranges={"random_move_prob": self.config.random_move_prob},
            sets={"model_white": [True, False]},
            kept=("random_move_prob", "model_white"),
            means={"mean_random_move_prob": "random_move_prob", "model_white": "model_white"},
        )

    def curation_defaults(self) -> dict[str, Any]:
        """Games of any outcome none of whose moves is a blunder by the engine's judgement."""
        return {"allowed_outcomes": [], "min_values": {"no_blunders": 1.0}}

    def teacher_policy(self, skill: float, seed: int) -> Policy:
        """Stockfish at `teacher_nodes` that plays a random move with probability `skill`."""
        return EnginePlayer(self.pool, self.config.teacher_nodes, self.config.reply_format, skill, seed)

    def scripted_policy(self, name: str, seed: int = 0) -> Policy | None:
        """`random`, `stockfish[-p]` (the opponent's engine and budget), `expert[-p]` or `teacher`; else None."""
        if name == "random" or name.split("-")[0] == OPPONENT_PREFIX:
            slip = opponent_skill(name)
            return EnginePlayer(self.pool, self.config.opponent_nodes, self.config.reply_format, slip, seed)
        return super().scripted_policy(name, seed)

    def corpus(self) -> Iterator[str]:
        """The system prompt and statuses (repeated, so a tokenizer learns them as few tokens), then the positions
        and moves of random games from the train split's openings."""
        c = self.config
        for _ in range(100):
            yield self.system_prompt
            yield from (s.format(color="white", opponent="Black", move="e7e5") for s in STATUS.values())
        for row in self.get_dataset("train").select(range(min(CORPUS_GAMES, len(self.get_dataset("train"))))):
            rng, board = random.Random(row["seed"]), chess.Board()
            for uci in row["start_moves"]:
                board.push_uci(uci)
            for _ in range(CORPUS_PLIES):
                if board.is_game_over():
                    break
                move = rng.choice(sorted(board.legal_moves, key=chess.Move.uci))
                yield f"<move>{move_text(board, move, c.reply_format)}</move>"
                status = STATUS["opponent"].format(
                    opponent=color_name(board.turn).capitalize(), move=move_text(board, move, c.reply_format)
                )
                board.push(move)
                yield user_message(status, board, c.rendering, c.reply_format, c.legal_moves)

    def render_episode(self, episode: Episode) -> str:
        """A game as its moves, the final board, and the policy's replies."""
        state = episode.state
        board = self.board_of(state)
        replies = [m.get("content") or "" for m in episode.messages if m.get("role") == "assistant"]
        said = "\n".join(f"turn {k + 1}: {text[:100]!r}" for k, text in enumerate(replies))
        losses = " ".join(str(c) for c in state.get("cp_losses", []))
        return (
            f"moves: {' '.join(state.get('moves', []))}\n{board}\n"
            f"centipawn loss per model move (capped at {CP_CAP}): {losses}\n{said}"
        ).replace("`", "'")

    def candidate_replies(self, episode: Episode) -> list[str]:
        """CandidateReplies: a reply for each legal move of the current position, in the reply format."""
        board = self.board_of(episode.state)
        moves = sorted(board.legal_moves, key=chess.Move.uci)
        return [f"<move>{move_text(board, m, self.config.reply_format)}</move>" for m in moves]

    def best_outcomes(self, branches: Branches) -> list[dict[str, float]]:
        """BestOutcomes: each reply valued by the engine at `judge_nodes`, as the rubric weighs its functions: the
        outcome by the expected score of the engine's evaluation after the move (`expected_score`; the engine's
        best play after it stands in for a solver's), move quality by its centipawn loss, format and an illegal
        reply's penalty (the position then stays the model's to move, rated by its best move, quality 0)."""
        return self.map_steps(lambda branch: self._engine_value(*branch), branches)

    def _engine_value(self, episode: Episode, reply) -> dict[str, float]:
        board, nodes = self.board_of(episode.state), self.config.judge_nodes
        raw = self.parser.parse_answer([reply.message()])
        move = read_move(board, raw, self.config.reply_format)
        best, best_cp = self.pool.best(board.fen(), nodes)
        if move is None:
            values = {"outcome": expected_score(best_cp), "move_quality": 0.0, "illegal_moves": 1.0}
        else:
            board.push(move)
            result = board.outcome(claim_draw=True)
            board.pop()
            cp = best_cp if move.uci() == best else self.pool.score_of(board.fen(), move.uci(), nodes)
            if result is not None:  # mate or a draw the rules decide: the outcome itself
                score = 0.5 if result.winner is None else float(result.winner == board.turn)
            else:
                score = expected_score(cp)
            loss = min(max(0, best_cp - cp), CP_CAP)
            values = {"outcome": score, "move_quality": 1.0 - loss / CP_CAP, "illegal_moves": 0.0}
        values["format"] = 1.0 if raw is not None else 0.0
        c = self.config
        values["reward"] = (
            c.outcome_weight * values["outcome"]
            + c.format_weight * values["format"]
            + c.quality_weight * values["move_quality"]
            + c.illegal_penalty * values["illegal_moves"]
        )
        return values

    # ----- wander ui: a person plays the opponent (BoardGame, wander/core/capabilities.py) -----

    def play_spec(self, spec: dict, policy_first: bool) -> dict:
        """The initial position, the policy white when it moves first."""
        return {**spec, "model_white": policy_first, "start_moves": [], "forced_replies": []}

    def person_side(self, policy_first: bool) -> str:
        """The person's colour: black against a policy that moves first, else white."""
        return "black" if policy_first else "white"

    def position(self, state: dict, reply: str | None = None) -> Position:
        """The board (rank 8 first, a piece's symbol on each square) after the policy's `reply`, and the legal
        moves of the side to move in the reply format (none once the game is over)."""
        board, fmt = self.board_of(state), self.config.reply_format
        if reply is not None:
            raw = self.parser.parse_answer([{"role": "assistant", "content": reply}])
            move = read_move(board, raw, fmt)
            if move is None:
                raise ValueError(f"{reply[:40]!r} is no legal move here")
            board.push(move)
        squares = []
        for rank in range(7, -1, -1):
            for file in range(8):
                piece = board.piece_at(chess.square(file, rank))
                squares.append(piece.unicode_symbol() if piece else "")
        over = board.outcome(claim_draw=True) is not None
        moves = () if over else tuple(sorted(move_text(board, m, fmt) for m in board.legal_moves))
        hint = "a move in UCI (e2e4)" if fmt == "uci" else "a move in SAN (Nf3)"
        return Position(tuple(squares), moves, {}, hint)

    def force_reply(self, target: dict, move: str) -> None:
        """The opponent's next move forced to `move` (in the reply format)."""
        target["forced_replies"] = [move]
