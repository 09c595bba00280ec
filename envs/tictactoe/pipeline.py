"""Tic-tac-toe's answers to the pipeline: its opponent matrix (envs/tictactoe/suite.py), spec checks, curation and
teacher, and the capabilities it opts into (wander/core/capabilities.py): exact evaluation, the worst case and
augmentation by the board's symmetries (decision branching is in env.py)."""

from __future__ import annotations

import functools
import json
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from envs.tictactoe.board import LEGAL_MOVES, STATES, is_over
from envs.tictactoe.exact import Memoized, exact_both_sides
from envs.tictactoe.exploit import best_response, line_positions, worst_case_lines, worst_case_summary
from envs.tictactoe.players import ExpertPlayer, opponent_skill, rationale, scripted_player
from envs.tictactoe.render import parse_board, reply_text
from envs.tictactoe.suite import SUITE
from envs.tictactoe.symmetry import symmetric_games
from envs.tictactoe.teacher import TEACHER_SKILL
from envs.tictactoe.tictactoe_config import SPLIT_SEED_RANGES
from envs.tictactoe.tree import decision_tree
from wander.core.episode import Episode
from wander.core.evaluation_suite import EvaluationSuite, matrix_suite_specs
from wander.core.pipeline_hooks import DEFAULT_SUITE_GAMES, PipelineHooks, SpecChecks, text_tokens
from wander.core.policy import Policy

SPEC_COLUMNS = ("seed", "random_move_prob", "stratum", "model_starts", "start_moves")


@functools.cache
def longest_reply(reply_format: str) -> str:
    """The teacher's longest reply in `reply_format`, over every legal move of every live position."""
    think = reply_format == "think"
    return max(
        (
            reply_text(c, rationale(b, c) if think else None)
            for b in STATES
            if not is_over(b)
            for c in LEGAL_MOVES[b]
        ),
        key=len,
    )


class TicTacToePipeline(PipelineHooks):
    """The opponent matrix (opponents x who moves first) as evaluation suite, exact results, board rendering."""

    outcomes = ("win", "draw", "loss")
    teacher_skill = TEACHER_SKILL
    reference_policies = ("minimax", "random")
    exact_note = "Expected rates summed over every reply the opponent can make, both sides pooled."
    """ExactEvaluation: how the exact results are computed."""
    exact_columns = (
        ("win", "win"),
        ("draw", "draw"),
        ("loss", "loss"),
        ("any_invalid", "games with an invalid move"),
        ("move_optimality", "optimal moves"),
    )
    """ExactEvaluation: the report's table of exact results."""

    def reply_tokens(self) -> int:
        """The teacher's longest reply in the configured format, for any tokenizer: 16 for `<move>N</move>`, more
        for a `<think>` rationale first."""
        return text_tokens(longest_reply(self.config.reply_format))

    def evaluation_suite(self) -> EvaluationSuite:
        """Opponents (weakest first) x who moves first; outcomes as rates, headline the non-loss rate."""
        return SUITE

    def check_suite_groups(self, names: Sequence[str]) -> None:
        """Every name is `random` or `minimax-<p>` (raises with the accepted names)."""
        for name in names:
            opponent_skill(name)

    def suite_games(self) -> int:
        """The cap alone: each cell draws fresh test-range seeds, so no split bounds it."""
        return DEFAULT_SUITE_GAMES

    def suite_specs(self, groups: Sequence[str], games: int, seed: int) -> list[dict]:
        """The frozen suite: `games` episode specs per (opponent, side), cell after cell, from `seed` alone."""
        cells = [
            (o, side, {"random_move_prob": opponent_skill(o), "model_starts": side == "first"})
            for o in groups
            for side in SUITE.sides
        ]
        # Seeds of the test range: never a training seed.
        return matrix_suite_specs(self.make_spec, cells, games, seed, SPLIT_SEED_RANGES["test"])

    def exact_suite(self, policy: Policy, groups: Sequence[str]) -> dict[str, dict[str, float]]:
        """ExactEvaluation: a greedy policy's exact expected rates against each opponent, both sides pooled, with
        the suite's headline (`non_loss`, one minus the losses, as the suite counts it) for the promotion gate."""
        policy = self._memoized(policy)  # one reply cache across opponents: they reach the same positions
        out = {}
        for o in groups:
            both = exact_both_sides(self, policy, opponent_skill(o))["both"]
            out[o] = {**both, "non_loss": 1.0 - both["loss"]}
        return out

    def worst_case(self, policy: Policy) -> dict[str, dict]:
        """WorstCase: the best response to a greedy policy, as X and as O (envs/tictactoe/exploit.py)."""
        return best_response(self, self._memoized(policy))

    def losing_positions(self, policy: Policy) -> list[Episode]:
        """LosingLines: the positions, the policy to move, on each side's line an opponent that knows the policy
        beats it by (`worst_case`), replayed against perfect minimax; empty when no side is lost."""
        policy = self._memoized(policy)  # the replay asks only positions the worst case asked
        worst = self.worst_case(policy)
        return [
            position
            for side, w in worst.items()
            if w["outcome"] == "loss"
            for position in line_positions(self, policy, side, w["line"])
        ]

    def decision_tree(self, policy: Policy, votes: int) -> list[Episode]:
        """DecisionTree: the verified teacher's games against every opponent reply, as X and as O
        (envs/tictactoe/tree.py)."""
        return decision_tree(self, policy, votes)

    def _memoized(self, policy: Policy) -> Memoized:
        # One reply cache per policy for as long as the policy lives: the worst case asks the positions the exact
        # results already asked (measured on the chat model: ~60 s a row saved), and the cache never keeps a
        # model in memory (weak keys, replies only).
        if isinstance(policy, Memoized):
            return policy
        caches = self.__dict__.setdefault("_reply_caches", weakref.WeakKeyDictionary())
        try:
            return Memoized(policy, caches.setdefault(policy, {}))
        except TypeError:  # a policy that cannot be weakly referenced: a cache of its own
            return Memoized(policy)

    def worst_case_lines(self, worst: Mapping[str, Mapping[str, dict]]) -> list[str]:
        """WorstCase: the report's table of each row's worst outcome per side, with its line (exploit.py)."""
        return worst_case_lines(worst)

    def worst_case_summary(self, worst: Mapping[str, dict]) -> list[str]:
        """WorstCase: the run summary's lines on one row's worst outcome per side, with the line to a loss
        (exploit.py)."""
        return worst_case_summary(worst)

    def equivalent_games(self, messages: list[dict]) -> list[list[dict]]:
        """Augmentation: the game's distinct images under the board's rotations and reflections
        (envs/tictactoe/symmetry.py)."""
        return symmetric_games(messages, self.config.rendering)

    def render_episode(self, episode: Episode) -> str:
        """A game as a row of boards (what the policy saw each turn, then the end) and the policy's replies."""
        boards, replies = [], []
        for i, message in enumerate(episode.messages):
            if message.get("role") == "assistant":
                shown = next(
                    (
                        parse_board(m["content"])
                        for m in reversed(episode.messages[:i])
                        if m["role"] == "user"
                    ),
                    None,
                )
                boards.append((f"turn {len(replies) + 1}", shown or "?" * 9))
                replies.append(message.get("content") or "")
        boards.append(("end", episode.state["board"]))
        blocks = []
        for start in range(0, len(boards), 6):
            chunk = boards[start : start + 6]
            lines = ["".join(f"{label:<14}" for label, _ in chunk)]
            for r in range(3):
                lines.append("".join(f"{' | '.join(b[3 * r : 3 * r + 3]):<14}" for _, b in chunk))
            blocks.append("\n".join(line.rstrip() for line in lines))
        # A valid move always changes the board, so an unchanged next board marks an invalid reply.
        invalid = [boards[k][1] == boards[k + 1][1] for k in range(len(replies))]
        said = [
            f"turn {k + 1}{' (invalid)' if bad else ''}: {json.dumps(text)[:100]}"
            for k, (text, bad) in enumerate(zip(replies, invalid, strict=True))
        ]
        return "\n\n".join(blocks) + "\n\n" + "\n".join(said).replace("`", "'")

    def spec_checks(self) -> SpecChecks:
        """Seeds, opponent skill within the config's range, strata, who starts, mid-game starts."""
        return SpecChecks(
            columns=SPEC_COLUMNS,
            strata=self.config.num_groups,
            ranges={"random_move_prob": self.config.random_move_prob},
            sets={"model_starts": [True, False]},
            kept=("random_move_prob", "model_starts"),
            means={"mean_random_move_prob": "random_move_prob", "model_starts": "model_starts"},
        )

    def curation_defaults(self) -> dict[str, Any]:
        """Wins and draws whose every move keeps the minimax value (the solver is the verifier)."""
        return {"allowed_outcomes": ["win", "draw"], "min_values": {"move_optimality": 1.0}}

    def teacher_policy(self, skill: float, seed: int) -> Policy:
        """The expert that slips to a random move with probability `skill` in quiet positions."""
        return ExpertPlayer(random_move_prob=skill, seed=seed)

    def scripted_policy(self, name: str, seed: int = 0) -> Policy | None:
        """`random`, `minimax[-p]`, `expert[-p]` or `teacher` (expert at the teacher's slip rate); else None."""
        if name == "teacher":
            return super().scripted_policy(name, seed)
        if name.split("-")[0] not in ("random", "minimax", "expert"):
            return None
        return scripted_player(name, seed=seed)
