"""The tic-tac-toe environment: the game (game.py) with the pipeline's answers (pipeline.py) and the powers its solver
gives it (wander/core/capabilities.py): decision branching for GRPO, exact learning curves.

The modules stack one way: board <- render <- players <- game <- exact <- exploit <- pipeline <- env.
"""

from __future__ import annotations

from collections.abc import Sequence

from envs.tictactoe.board import legal_moves, play
from envs.tictactoe.exact import best_after, exact_both_sides, expected_after
from envs.tictactoe.game import CURVE_OPPONENTS, TicTacToeGame
from envs.tictactoe.pipeline import TicTacToePipeline
from wander.core.capabilities import Position
from wander.core.episode import Episode
from wander.core.policy import Policy, Reply


class TicTacToeEnv(TicTacToePipeline, TicTacToeGame):
    """Multi-turn tic-tac-toe (`TicTacToeGame`) that answers the pipeline (`TicTacToePipeline`) and opts into decision
    branching for GRPO: `candidate_replies` (its legal moves), `expected_outcomes` (a sum over its opponent's
    answers) and `best_outcomes` (its solver playing on); and a person plays it against a policy in `wander ui`
    (`BoardGame`: the free cells are the person's moves)."""

    def curve_metrics(self, policy: Policy) -> dict[str, float]:
        """The learning-curve suite: exact results of a greedy policy vs perfect minimax and a random player, and
        `adversary/loss`: the share of sides (X, O) on which an opponent that knows the policy beats it."""
        # The policy's own reply cache: a `losing_positions` of the same policy after it asks nothing new.
        policy, out = self._memoized(policy), {}
        for opponent, p in CURVE_OPPONENTS.items():
            both = exact_both_sides(self, policy, p)["both"]
            out.update(
                {f"{opponent}/{m}": both[m] for m in ("win", "loss", "any_invalid", "move_optimality")}
            )
        # The adversary asks only positions a random player reaches, all asked above: no new model calls.
        worst = self.worst_case(policy)
        out["adversary/loss"] = sum(side["outcome"] == "loss" for side in worst.values()) / len(worst)
        return out

    def candidate_replies(self, episode: Episode) -> list[str]:
        """CandidateReplies: a reply for each legal move of the current position, in the env's reply format."""
        board = episode.state["board"]
        return [self.reply_for(board, c) for c in legal_moves(board)]

    def expected_outcomes(
        self, branches: Sequence[tuple[Episode, Reply]], policy: Policy
    ) -> list[dict[str, float]]:
        """ExpectedOutcomes: each episode's expected reward and rubric values after its reply, over every answer of
        its opponent (at the episode's skill), `policy` greedy from then on (envs/tictactoe/exact.py)."""
        return expected_after(self, policy, branches)

    def best_outcomes(self, branches: Sequence[tuple[Episode, Reply]]) -> list[dict[str, float]]:
        """BestOutcomes: each episode's expected reward and rubric values after its reply, over every answer of its
        opponent, with the best value-keeping play against that opponent after it (envs/tictactoe/exact.py)."""
        return best_after(self, branches)

    # ----- wander ui: a person plays the opponent (BoardGame, wander/core/capabilities.py) -----

    def play_spec(self, spec: dict, policy_first: bool) -> dict:
        """An empty board, the policy's mark X when it moves first."""
        return {**spec, "model_starts": policy_first, "start_moves": [], "forced_replies": []}

    def person_side(self, policy_first: bool) -> str:
        """The person's mark: O against a policy that starts, else X."""
        return "O" if policy_first else "X"

    def position(self, state: dict, reply: str | None = None) -> Position:
        """The board after the policy's `reply` (its mark on the cell), each free cell a move by its number."""
        board = state["board"]
        if reply is not None:
            cell = self.move_of(reply, board)
            if cell is None:
                raise ValueError(f"{reply[:40]!r} plays no free cell")
            board = play(board, cell, state["mark"])
        free = tuple(str(c) for c in legal_moves(board))  # none once a line is won
        return Position(
            tuple("" if c == "." else c for c in board),
            free,
            {int(c): c for c in free},
            "a free cell's number",
        )

    def force_reply(self, target: dict, move: str) -> None:
        """The opponent's next move forced to the cell `move`."""
        target["forced_replies"] = [int(move)]
