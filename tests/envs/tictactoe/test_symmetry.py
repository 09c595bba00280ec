"""The board's symmetries: they keep every position's value and optimal moves, and whole games map to games the
env itself would render, in every rendering and reply format."""

from __future__ import annotations

import pytest

from envs.tictactoe import ExpertPlayer
from envs.tictactoe.board import LEGAL_MOVES, STATES, optimal_moves, value
from envs.tictactoe.render import parse_board
from envs.tictactoe.symmetry import SYMMETRIES, symmetric_games, transform_board, transform_game
from wander import load_environment


def inverse(source: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(sorted(range(9), key=lambda i: source[i]))


def test_the_eight_symmetries_form_the_group_of_the_square() -> None:
    assert SYMMETRIES[0] == tuple(range(9)) and len(set(SYMMETRIES)) == 8
    for a in SYMMETRIES:
        assert inverse(a) in SYMMETRIES
        for b in SYMMETRIES:
            assert tuple(a[b[i]] for i in range(9)) in SYMMETRIES
        assert a[4] == 4  # the centre stays; corners stay corners
        assert {a[c] for c in (0, 2, 6, 8)} == {0, 2, 6, 8}


def test_every_position_keeps_its_value_and_its_optimal_moves() -> None:
    for board in STATES:
        for source in SYMMETRIES:
            image = transform_board(board, source)
            assert image in LEGAL_MOVES and value(image) == value(board)
            if LEGAL_MOVES[board]:
                target = inverse(source)  # the cell a move lands on in the image
                assert set(optimal_moves(image)) == {target[m] for m in optimal_moves(board)}


def played_games(rendering: str, reply_format: str) -> list[list[dict]]:
    env = load_environment(
        "tictactoe", rendering=rendering, reply_format=reply_format, num_eval=6, max_turns=8
    )
    episodes = env.rollout(ExpertPlayer(0.5, seed=1), env.get_dataset("eval").to_list())
    return [ep.messages for ep in episodes]


@pytest.mark.parametrize(
    ("rendering", "reply_format"),
    [
        ("board", "move"),
        ("spaced", "move"),
        ("lines", "move"),
        ("compact", "move"),
        ("grid", "think"),
        ("grid", "move"),
    ],
)
def test_a_game_maps_to_the_game_on_the_mirrored_board(rendering: str, reply_format: str) -> None:
    env = load_environment("tictactoe", rendering=rendering, reply_format=reply_format)
    for messages in played_games(rendering, reply_format):
        for source in SYMMETRIES[1:]:
            image = transform_game(messages, source, rendering)
            target = inverse(source)
            assert [m["role"] for m in image] == [m["role"] for m in messages]
            for k, (was, now) in enumerate(zip(messages, image, strict=True)):
                if was["role"] == "system":
                    assert now == was
                elif was["role"] == "user":
                    assert parse_board(now["content"]) == transform_board(parse_board(was["content"]), source)
                else:  # the reply plays the image of the move, where the env reads it
                    board = parse_board(messages[k - 1]["content"])
                    cell = env.move_of(was["content"], board)
                    assert env.move_of(now["content"], transform_board(board, source)) == target[cell]
            assert (
                transform_game(image, inverse(source), rendering) == messages
            )  # back, character for character


def test_distinct_images_only() -> None:
    asymmetric = played_games("board", "move")[0]
    assert len(symmetric_games(asymmetric, "board")) == 7
    centre_first = [
        {"role": "user", "content": "012/345/678\nX"},
        {"role": "assistant", "content": "<move>4</move>"},
    ]
    assert symmetric_games(centre_first, "board") == []  # every image is the game itself
    corner_first = [
        {"role": "user", "content": "012/345/678\nX"},
        {"role": "assistant", "content": "<move>0</move>"},
    ]
    assert [g[1]["content"] for g in symmetric_games(corner_first, "board")] == [
        "<move>2</move>",
        "<move>8</move>",
        "<move>6</move>",
    ]


def test_a_turn_without_a_board_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="curate.augment"):
        transform_game([{"role": "user", "content": "hello"}], SYMMETRIES[1], "board")
