"""Odd replies are invalid moves, re-prompted on the same board: never an errored episode (fuzzed)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.tictactoe.render import parse_board
from wander import load_environment

ODD_MOVES = [
    "<move>04</move>",  # a leading zero
    "<move>00</move>",
    "<move>４</move>",  # fullwidth digit
    "<move>²</move>",  # superscript digit
    "<move>٣</move>",  # Arabic-Indic digit
    "<move>" + "7" * 5000 + "</move>",  # beyond int()'s digit limit
    "<move>-1</move>",
    "<move>+4</move>",
    "<move>4.0</move>",
    "<move>42</move>",
    "<move>9</move>",
    "I refuse to play",
    "",
]


@pytest.mark.parametrize("reply", ODD_MOVES, ids=range(len(ODD_MOVES)))
def test_odd_move_is_an_invalid_move_reprompted(reply: str) -> None:
    env = load_environment("tictactoe", max_turns=8)
    first = env.reset(seed=3)
    board_before = env.episode.state["board"]
    observation, reward, done, info = env.step(reply)
    assert info["error"] is None
    assert not done and reward == 0.0
    assert info["state"]["invalid"] == 1 and info["state"]["board"] == board_before
    assert parse_board(observation) == parse_board(first) == board_before  # the same board, shown again


def test_a_valid_move_after_odd_ones_still_plays() -> None:
    env = load_environment("tictactoe", max_turns=8)
    env.reset(seed=3)
    env.step("<move>04</move>")
    empty = env.episode.state["board"].index(".")
    _, _, _, info = env.step(f"<move>{empty}</move>")
    assert info["error"] is None and info["state"]["model_moves"] == 1 and info["state"]["invalid"] == 1


replies = st.one_of(
    st.text(max_size=40),
    st.text(max_size=12).map(lambda t: f"<move>{t}</move>"),
    st.integers(min_value=-(10**30), max_value=10**30).map(lambda n: f"<move>{n}</move>"),
    st.sampled_from(ODD_MOVES),
)


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(min_value=0, max_value=10**6), moves=st.lists(replies, min_size=1, max_size=10))
def test_fuzzed_replies_never_error_an_episode(seed: int, moves: list[str]) -> None:
    env = load_environment("tictactoe", max_turns=8)
    env.reset(seed=seed)
    for move in moves:
        _, reward, done, info = env.step(move)
        assert info["error"] is None, info["error"]
        assert info["state"]["invalid"] + info["state"]["model_moves"] == info["state"]["turn"]
        if done:
            assert info["state"]["outcome"] in ("win", "draw", "loss") and isinstance(reward, float)
            break
