"""Exact evaluation: a deterministic policy's expected results against a scripted opponent, without sampling.

A greedy policy answers each conversation one way, and the opponent's reply at a board has a known distribution
(`opponent_distribution`), so the expected win/draw/loss of the policy is a sum over the tree of the opponent's
replies: a few hundred to a few thousand positions per side, each asked of the policy once, in batches. The
episodes are the environment's own (its `advance` applies the model's reply, re-prompts invalid moves and ends
games), with the opponent's reply forced to each possible cell in turn, so the numbers are what sampled games
converge to, with no noise. Only for policies that answer a conversation the same way every time.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence

from envs.tictactoe.board import (
    EMPTY_BOARD,
    is_over,
    opponent_distribution,
    optimal_moves,
    play,
    to_move,
    winner,
)
from envs.tictactoe.game import TicTacToeGame
from wander.core.episode import Episode
from wander.core.policy import Policy, Reply

# episodes (the model to move in each) -> one reply each
AskFn = Callable[[list[Episode]], list[Reply]]

METRICS = ("win", "draw", "loss", "any_invalid", "invalid_moves", "move_optimality", "reward")


class Memoized:
    """A deterministic policy asked each distinct conversation once: positions recur across move orders, sides
    and opponents (with `history="current"`, 873 questions vs random are 232 distinct positions)."""

    def __init__(self, policy: Policy, replies: dict[str, Reply] | None = None):
        self.policy, self.replies = policy, {} if replies is None else replies

    def __call__(self, conversations: Sequence[list]) -> list[Reply]:
        """The policy's replies, asking it only about conversations it has not answered yet."""
        keys = [json.dumps(c, sort_keys=True) for c in conversations]
        new = {k: c for k, c in zip(keys, conversations, strict=True) if k not in self.replies}
        if new:
            answers = self.policy([list(c) for c in new.values()])
            for key, reply in zip(new, answers, strict=True):
                self.replies[key] = reply if isinstance(reply, Reply) else Reply(str(reply))
        return [self.replies[k] for k in keys]


def memoized(policy: Policy) -> Memoized:
    """`policy` behind a reply cache (itself when it already has one)."""
    return policy if isinstance(policy, Memoized) else Memoized(policy)


def exact_results(
    env: TicTacToeGame, policy: Policy, random_move_prob: float, model_starts: bool, max_batch_size: int = 256
) -> dict[str, float]:
    """Expected metrics of a deterministic policy against minimax with this skill, playing X or O."""
    spec = {"seed": 0, "random_move_prob": random_move_prob, "stratum": 0, "model_starts": model_starts}
    if model_starts:
        frontier = [(0, 1.0, env.start(spec))]
    else:
        frontier = [
            (0, q, env.start({**spec, "forced_replies": [cell]}))
            for cell, q in opponent_distribution(EMPTY_BOARD, random_move_prob).items()
        ]
    leaves = _expand(env, asker(env, memoized(policy), max_batch_size), frontier, [])
    out = _sums(leaves, 1)[0]
    out["positions"] = float(len(leaves))
    return out


def expected_after(
    env: TicTacToeGame, policy: Policy, branches: Sequence[tuple[Episode, Reply]], max_batch_size: int = 256
) -> list[dict[str, float]]:
    """Expected metrics of each episode after its given reply, over every answer of its opponent, the policy
    greedy from then on: the value of that one move, with no luck of later samples in it."""
    return _after(env, asker(env, memoized(policy), max_batch_size), branches)


def best_after(env: TicTacToeGame, branches: Sequence[tuple[Episode, Reply]]) -> list[dict[str, float]]:
    """Expected metrics of each episode after its given reply, over every answer of its opponent, with the best
    value-keeping play against that opponent from then on (`best_move`): the move's value by itself, whatever the
    model would play after it."""

    def ask(episodes: list[Episode]) -> list[Reply]:
        return [
            Reply(
                env.reply_for(ep.state["board"], best_move(ep.state["board"], ep.state["random_move_prob"]))
            )
            for ep in episodes
        ]

    return _after(env, ask, branches)


@functools.cache
def best_move(board: str, random_move_prob: float, draw: float = 0.5) -> int:
    """The value-keeping move with the highest expected outcome (win 1, draw `draw`, loss 0) against minimax at
    this skill (ties: the lowest cell)."""
    return max(
        optimal_moves(board), key=lambda cell: (move_value(board, cell, random_move_prob, draw), -cell)
    )


def best_value(board: str, random_move_prob: float, draw: float = 0.5) -> float:
    """Expected outcome for the player to move at `board` with `best_move` from here on."""
    return move_value(board, best_move(board, random_move_prob, draw), random_move_prob, draw)


@functools.cache
def move_value(board: str, cell: int, random_move_prob: float, draw: float = 0.5) -> float:
    """Expected outcome (win 1, draw `draw`, loss 0) for the player to move at `board` after it plays `cell`,
    against minimax at this skill, with `best_move` after it."""
    mark = to_move(board)
    after = play(board, cell, mark)
    if is_over(after):
        return 1.0 if winner(after) else draw
    total = 0.0
    for reply, q in opponent_distribution(after, random_move_prob).items():
        answered = play(after, reply, to_move(after))
        if not is_over(answered):
            total += q * best_value(answered, random_move_prob, draw)
        elif not winner(answered):
            total += q * draw
    return total


def asker(env: TicTacToeGame, policy: Policy, max_batch_size: int) -> AskFn:
    """A policy asked about episodes through their observations, in batches."""
    return lambda episodes: _ask(policy, [env.observation(ep) for ep in episodes], max_batch_size)


def _after(
    env: TicTacToeGame, ask: AskFn, branches: Sequence[tuple[Episode, Reply]]
) -> list[dict[str, float]]:
    leaves: list[tuple[int, float, Episode]] = []
    frontier: list[tuple[int, float, Episode]] = []
    for root, (episode, reply) in enumerate(branches):
        for q, child in opponent_branches(env, 1.0, episode, reply):
            (leaves if child.done else frontier).append((root, q, child))
    return _sums(_expand(env, ask, frontier, leaves), len(branches))


def _expand(
    env: TicTacToeGame,
    ask: AskFn,
    frontier: list[tuple[int, float, Episode]],
    leaves: list[tuple[int, float, Episode]],
) -> list[tuple[int, float, Episode]]:
    """Every finished game below the frontier's positions (model to move), with its root and probability."""
    while frontier:
        replies = ask([ep for _, _, ep in frontier])
        children = []
        for (root, q, episode), reply in zip(frontier, replies, strict=True):
            children += [(root, p, child) for p, child in opponent_branches(env, q, episode, reply)]
        frontier = []
        for root, q, child in children:
            (leaves if child.done else frontier).append((root, q, child))
    env.score([ep for _, _, ep in leaves])
    return leaves


def _sums(leaves: list[tuple[int, float, Episode]], roots: int) -> list[dict[str, float]]:
    out = [dict.fromkeys(METRICS, 0.0) for _ in range(roots)]
    for root, q, episode in leaves:
        for m in dict.fromkeys([*METRICS, *episode.values]):  # a set would order keys by the hash seed
            out[root][m] = out[root].get(m, 0.0) + q * _value(episode, m)
    return out


def exact_both_sides(
    env: TicTacToeGame, policy: Policy, random_move_prob: float, max_batch_size: int = 256
) -> dict[str, dict[str, float]]:
    """Exact metrics as X, as O, and both sides pooled (each side half the games, as in the eval splits)."""
    policy = memoized(policy)
    sides = {
        "X": exact_results(env, policy, random_move_prob, True, max_batch_size),
        "O": exact_results(env, policy, random_move_prob, False, max_batch_size),
    }
    sides["both"] = {m: (sides["X"][m] + sides["O"][m]) / 2 for m in sides["X"]}
    return sides


def side_starts(env: TicTacToeGame) -> dict[str, list[Episode]]:
    """The policy's first turn as X (the empty board) and as O (after each of X's nine openings), against an
    opponent at skill 1.0, so that every later answer of the opponent is in reach."""
    spec = {"seed": 0, "random_move_prob": 1.0, "stratum": 0}
    return {
        "X": [env.start({**spec, "model_starts": True})],
        "O": [env.start({**spec, "model_starts": False, "forced_replies": [c]}) for c in range(9)],
    }


def opponent_branches(
    env: TicTacToeGame, q: float, episode: Episode, reply: Reply
) -> list[tuple[float, Episode]]:
    """The episode after the reply, once per possible opponent answer (at the episode's opponent skill), with
    its probability."""
    answers = opponent_answers(env, episode, reply)
    if answers[0][0] is None:
        return [(q, answers[0][1])]
    faced = answers[0][1].state["opponent_faced"]
    probs = opponent_distribution(faced, episode.state["random_move_prob"])
    return [(q * probs[cell], child) for cell, child in answers]


def opponent_answers(env: TicTacToeGame, episode: Episode, reply: Reply) -> list[tuple[int | None, Episode]]:
    """The episode after the reply, once per answer the opponent can make at its skill, with the cell it plays;
    one episode with cell None when no answer follows (an invalid move re-prompted, or the game over)."""
    reply = Reply(reply.content)  # token ids are not needed to score
    probe = episode.fork()
    probe.state["opponent_faced"] = None
    env.advance(probe, reply)
    faced = probe.state["opponent_faced"]
    if faced is None:
        return [(None, probe)]
    out = []
    for cell in opponent_distribution(faced, episode.state["random_move_prob"]):
        child = episode.fork()
        child.state["forced_replies"] = [cell]
        env.advance(child, reply)
        out.append((cell, child))
    return out


def _ask(policy: Policy, conversations: Sequence[list], max_batch_size: int) -> list[Reply]:
    replies: list[Reply] = []
    for i in range(0, len(conversations), max_batch_size):
        chunk = [list(c) for c in conversations[i : i + max_batch_size]]
        replies += [r if isinstance(r, Reply) else Reply(str(r)) for r in policy(chunk)]
    return replies


def _value(episode: Episode, metric: str) -> float:
    if metric == "reward":
        return episode.reward
    return float(episode.values.get(metric, 0.0))
