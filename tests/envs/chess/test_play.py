"""A person plays chess against a policy in `wander ui` (wander/ui/play.py): the person's moves are the env's
opponent's, forced, so the game is the env's own episode (its messages, engine judgement, rubric)."""

from __future__ import annotations

import chess
import pytest

from wander import load_environment
from wander.core.capabilities import BoardGame
from wander.core.replay import replay_problems
from wander.ui.play import Games, PlayError, new_game, person_move

from ..scripted import Says

SMALL = {"num_train": 8, "num_eval": 8, "num_test": 8, "max_turns": 3}


@pytest.fixture(scope="module")
def env():
    env = load_environment("chess", **SMALL)
    yield env
    env.close()


def square(name: str) -> int:
    """A square's index in a `Position` (rank 8 first, file a first)."""
    sq = chess.parse_square(name)
    return (7 - chess.square_rank(sq)) * 8 + chess.square_file(sq)


@pytest.mark.parametrize("side", ["first", "second"])
def test_a_person_plays_a_whole_game_against_the_engine(env, side):
    assert isinstance(env, BoardGame)
    game = new_game(Games(seed=1), env, "stockfish", env.scripted_policy("stockfish"), side)
    assert game.person_mark == ("white" if side == "first" else "black")
    start = game.position()
    assert len(start.squares) == 64 and start.squares[square("e1")] == "♔"
    played = []
    while not game.done:
        seen = game.position()
        board = env.board_of(game.episode.state) if game.episode else chess.Board()
        if game.pending is not None:
            board.push_uci(game.pending.removeprefix("<move>").removesuffix("</move>"))
        assert sorted(seen.moves) == sorted(m.uci() for m in board.legal_moves)  # the person's legal moves
        move = seen.moves[0]
        person_move(game, move)
        played.append(move)
    ep = game.episode
    assert ep.state["ending"] == "adjudicated" and ep.state["model_moves"] == SMALL["max_turns"]
    assert set(ep.values) == set(env.rubric.names) and len(ep.state["cp_losses"]) == SMALL["max_turns"]
    assert ep.values["acpl"] < 50  # the engine's own moves, judged by a deeper search of the same engine
    assert ep.state["moves"][: 1 + (side == "second")][-1] == played[0]
    assert game.position().moves == ()
    # The game is the env's own: its opponent forced to the person's moves replays to the same record.
    record = {**ep.to_dict(), "spec": {**game.spec, "forced_replies": played}}
    assert replay_problems(env, record) == []


def test_the_policy_mating_on_its_move_ends_the_game(env):
    game = new_game(Games(), env, "says", Says("<move>e7e5</move>", "<move>d8h4</move>"), "first")
    person_move(game, "f2f3")
    assert game.pending == "<move>e7e5</move>" and game.position().squares[square("e5")] == "♟"
    person_move(game, "g2g4")
    assert (
        game.done and game.episode.state["outcome"] == "win" and game.episode.state["ending"] == "checkmate"
    )
    assert game.position().moves == () and game.position().squares[square("h4")] == "♛"
    with pytest.raises(PlayError, match="over"):
        person_move(game, "a2a3")


def test_bad_moves_and_illegal_replies(env):
    game = new_game(Games(), env, "says", Says("<move>e7e4</move>", "<move>e7e5</move>"), "first")
    for text, reason in [
        ("e2e5", r"'e2e5' is not a move here: give a move in UCI \(e2e4\), one of a2a3, a2a4,"),
        ("E2E4", "'E2E4' is not a move here"),
        ("", "'' is not a move here"),
    ]:
        with pytest.raises(PlayError, match=reason):
            person_move(game, text)
    assert game.episode is None
    person_move(game, "e2e4")
    # An illegal reply counted by the env and shown as such, then a move held for the person's answer.
    assert [(t.who, t.raw, t.valid) for t in game.turns] == [
        ("person", "e2e4", True),
        ("says", "<move>e7e4</move>", False),
        ("says", "<move>e7e5</move>", True),
    ]
    assert game.episode.state["illegal"] == 1 and game.pending == "<move>e7e5</move>"
    assert game.position().squares[square("e4")] == "♙" and "g1f3" in game.position().moves
    # Out of turns on the next reply: the illegal one ends the game, a forfeit.
    game.policy = Says("<move>a1a1</move>")
    person_move(game, "g1f3")
    assert game.done and game.episode.state["ending"] == "forfeit" and game.turns[-1].valid is False
