"""The teacher's tree (synthesize's `mode: tree`): every position a student that plays the verified teacher meets,
against every opponent reply, as X and as O; each asked `votes` times, the solver choosing."""

from __future__ import annotations

from collections import Counter

import pytest

from envs.tictactoe.board import EMPTY_BOARD, OPTIMAL_MOVES, is_over, legal_moves, play, to_move
from envs.tictactoe.exact import move_value
from envs.tictactoe.players import ExpertPlayer, board_of
from envs.tictactoe.tree import VerifiedVotes
from wander import Reply, load_environment
from wander.core.capabilities import DecisionTree
from wander.core.replay import replay_problems


class SlippingTeacher:
    """The embedded teacher's brain with a fresh seed per request, as the served teacher answers: each reply an
    independent draw; counts what it was asked."""

    def __init__(self, skill: float = 0.5) -> None:
        self.skill, self.asked = skill, Counter()

    def __call__(self, conversations):
        replies = []
        for c in conversations:
            self.asked[board_of(c)] += 1
            replies.append(ExpertPlayer(self.skill, seed=sum(self.asked.values()))([c])[0])
        return replies


class Scripted:
    """Replies from a list, in order, whatever is asked."""

    def __init__(self, cells: list[int]) -> None:
        self.cells = cells

    def __call__(self, conversations):
        return [Reply(f"<move>{cell}</move>") for cell in self.cells[: len(conversations)]]


@pytest.fixture(scope="module")
def env():
    return load_environment("tictactoe", rendering="lines")


@pytest.fixture(scope="module")
def tree(env):
    teacher = SlippingTeacher()
    return env.decision_tree(teacher, 6), teacher


def _moves_of(env, games) -> dict[str, int]:
    """The teacher's move at each board of the games (one per board: the tree is one player's)."""
    moves: dict[str, set] = {}
    for game in games:
        board = EMPTY_BOARD
        for message in game.messages:
            if message["role"] == "user":
                board = board_of([message])
            elif message["role"] == "assistant":
                moves.setdefault(board, set()).add(env.move_of(message["content"], board))
    assert all(len(cells) == 1 for cells in moves.values()), "one reply per position"
    return {board: cells.pop() for board, cells in moves.items()}


def _leaves(moves: dict[str, int]) -> int:
    """Games a player with these moves plays against every opponent reply, both sides (KeyError: a position the
    tree left out)."""

    def walk(board: str, me: str) -> int:
        if is_over(board):
            return 1
        if to_move(board) == me:
            return walk(play(board, moves[board], me), me)
        return sum(walk(play(board, c, to_move(board)), me) for c in legal_moves(board))

    return walk(EMPTY_BOARD, "X") + walk(EMPTY_BOARD, "O")


def _asked(env, start_moves: list[int]) -> list[dict]:
    """What the player to move reads after `start_moves`."""
    spec = {"seed": 0, "random_move_prob": 1.0, "stratum": 0, "model_starts": not start_moves}
    return env.observation(env.start({**spec, "start_moves": start_moves}))


def test_tictactoe_has_the_tree(env) -> None:
    assert isinstance(env, DecisionTree)


def test_the_tree_holds_every_position_a_student_that_plays_like_the_teacher_meets(env, tree) -> None:
    games, teacher = tree
    moves = _moves_of(env, games)
    assert _leaves(moves) == len(games)  # no position missing, no game twice
    assert set(teacher.asked) == set(moves)  # asked only where the tree goes
    assert set(teacher.asked.values()) == {6}  # each position once, `votes` times
    assert 300 < len(moves) < 700


def test_every_move_of_the_tree_keeps_the_value_and_no_game_is_lost(env, tree) -> None:
    games, _ = tree
    assert all(g.values["move_optimality"] == 1.0 and g.state["invalid"] == 0 for g in games)
    assert {g.state["outcome"] for g in games} == {"win", "draw"}


def test_tree_games_replay_from_their_specs_with_fresh_seeds_and_balanced_strata(env, tree) -> None:
    games, _ = tree
    assert [g.seed for g in games] == list(range(len(games)))
    assert all(not replay_problems(env, g.to_dict()) for g in games)
    strata = Counter(g.spec["stratum"] for g in games)
    assert (
        set(strata) == set(range(env.config.num_groups)) and max(strata.values()) - min(strata.values()) <= 1
    )
    firsts = [g.spec["model_starts"] for g in games]
    assert firsts == sorted(firsts, reverse=True)  # X's games, then O's


def test_a_vote_that_keeps_the_value_wins_over_more_frequent_ones_that_lose_it(env) -> None:
    board = play(EMPTY_BOARD, 0, "X")  # O to move: only the centre keeps the draw
    assert OPTIMAL_MOVES[board] == (4,)
    conversation = _asked(env, [0])
    (reply,) = VerifiedVotes(env, Scripted([1, 1, 1, 4]), 4)([conversation])
    assert reply.content == "<move>4</move>"


def test_among_value_keeping_votes_the_best_against_a_random_opponent_is_played(env) -> None:
    conversation = _asked(env, [])
    offered = [1, 1, 1, 0, 4]  # every opening keeps the draw; the edge is the most frequent
    (reply,) = VerifiedVotes(env, Scripted(offered), 5)([conversation])
    best = max(set(offered), key=lambda c: move_value(EMPTY_BOARD, c, 1.0))
    assert best != 1 and reply.content == f"<move>{best}</move>"


def test_without_a_value_keeping_vote_the_most_frequent_reply_is_played(env) -> None:
    conversation = _asked(env, [0])
    (reply,) = VerifiedVotes(env, Scripted([2, 1, 2]), 3)([conversation])
    assert reply.content == "<move>2</move>"
    with pytest.raises(ValueError, match="votes must be at least 1"):
        VerifiedVotes(env, Scripted([]), 0)
