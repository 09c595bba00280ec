"""The teacher over the student's whole tree: every position a player that plays the teacher's verified replies meets,
against every reply of its opponent, as X and as O (the `DecisionTree` capability).

Games against sampled opponents leave out most of what a greedy student is later asked: of the ~450 positions its
exact results ask, 42% never occur in 2,000 teacher games (docs/experiments/chat-model.md). Here each position is
asked of the teacher `votes` times (identical requests get distinct request seeds); the solver, the env's verifier,
keeps the replies that keep the position's minimax value and plays the one with the best expected outcome against a
random opponent (its every reply is in reach), so the tree is one consistent player's. Each leaf is then played
again as an ordinary episode whose spec forces the opponent's replies, so the games replay through the env as
curate checks them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from envs.tictactoe.board import OPTIMAL_MOVES
from envs.tictactoe.exact import Memoized, asker, move_value, opponent_answers, side_starts
from envs.tictactoe.game import TicTacToeGame
from envs.tictactoe.players import board_of
from wander.core.episode import Episode
from wander.core.policy import Conversation, Policy, Reply


class VerifiedVotes:
    """A policy asked `votes` times per conversation; of its replies, the value-keeping one with the best expected
    outcome against a random opponent (ties: the most frequent, then the lowest cell), else its most frequent reply."""

    def __init__(self, env: TicTacToeGame, policy: Policy, votes: int):
        if votes < 1:
            raise ValueError(f"votes must be at least 1, got {votes}")
        self.env, self.policy, self.votes = env, policy, votes

    def __call__(self, conversations: Sequence[Conversation]) -> list[Reply]:
        """One chosen reply per conversation."""
        asked = [list(c) for c in conversations for _ in range(self.votes)]
        replies = [r if isinstance(r, Reply) else Reply(str(r)) for r in self.policy(asked)]
        return [
            self._choose(board_of(c), replies[i * self.votes : (i + 1) * self.votes])
            for i, c in enumerate(conversations)
        ]

    def _choose(self, board: str, replies: list[Reply]) -> Reply:
        cells = [self.env.move_of(r.content, board) for r in replies]
        counts = Counter(c for c in cells if c is not None and c in OPTIMAL_MOVES[board])
        if not counts:  # the most frequent reply: its games fail curation, which counts them
            said = Counter(r.content for r in replies)
            return next(r for r in replies if said[r.content] == max(said.values()))
        best = max(counts, key=lambda c: (move_value(board, c, 1.0), counts[c], -c))
        return replies[cells.index(best)]


def decision_tree(env: TicTacToeGame, policy: Policy, votes: int, max_batch_size: int = 256) -> list[Episode]:
    """The games the verified teacher plays against every sequence of opponent replies, one per leaf, X's first:
    each an episode of its own seed (0, 1, ...), strata round-robin (every game stands for every opponent), the
    opponent's replies forced by its spec."""
    # A position recurs under other move orders (and in the replay below): asked once.
    teacher = Memoized(VerifiedVotes(env, policy, votes))
    ask = asker(env, teacher, max_batch_size)
    frontier: list[tuple[Episode, bool, list[int]]] = [
        (episode, side == "X", [] if side == "X" else list(episode.spec["forced_replies"]))
        for side, starts in side_starts(env).items()
        for episode in starts
    ]
    leaves: list[tuple[bool, list[int]]] = []
    while frontier:
        replies = ask([ep for ep, _, _ in frontier])
        children = []
        for (episode, first, cells), reply in zip(frontier, replies, strict=True):
            for cell, child in opponent_answers(env, episode, reply):
                children.append((child, first, cells if cell is None else [*cells, cell]))
        frontier = [c for c in children if not c[0].done]
        leaves += [(first, cells) for child, first, cells in children if child.done]
    leaves.sort(key=lambda leaf: (not leaf[0], leaf[1]))
    groups = env.config.num_groups
    specs = [
        {
            "seed": n,
            "random_move_prob": 1.0,
            "stratum": n % groups,
            "model_starts": first,
            "start_moves": [],
            "forced_replies": cells,
        }
        for n, (first, cells) in enumerate(leaves)
    ]
    return env.rollout(teacher, specs)
