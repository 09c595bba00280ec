"""Win regret against a random player: the limits, the performance-difference identity, invalid replies."""

import pytest

from envs.tictactoe.board import EMPTY_BOARD, legal_moves, optimal_moves, play, to_move, winner
from envs.tictactoe.players import MinimaxPlayer, RandomPlayer
from envs.tictactoe.regret import best_wins, move_wins, win_regret
from wander import Reply, load_environment


class WinMaximiser(RandomPlayer):
    """The limit's own play: among value-keeping moves, the one that wins most against a random player."""

    def choose(self, board: str) -> int:
        return max(optimal_moves(board), key=lambda cell: move_wins(board, cell))


def test_the_limits_are_the_best_value_keeping_play_against_random():
    env = load_environment("tictactoe")
    result = win_regret(env, WinMaximiser())
    assert result["X"]["limit"] == pytest.approx(0.9948, abs=1e-4) == best_wins(EMPTY_BOARD)
    assert result["O"]["limit"] == pytest.approx(0.9164, abs=1e-4)
    for side in result.values():
        assert side["wins"] == pytest.approx(side["limit"], abs=1e-12) and side["moves"] == []


def test_wins_and_regrets_add_up_to_the_limit():
    # Minimax with random tie-breaks, each position asked once (win_regret memoizes): a deterministic policy.
    result = win_regret(load_environment("tictactoe"), MinimaxPlayer(0.0, seed=0))
    for side in result.values():
        regret = sum(m["regret"] for m in side["moves"])
        assert side["wins"] == pytest.approx(side["limit"] - regret, abs=1e-9)
        assert all(m["regret"] > 0 and m["move"] not in m["best"] for m in side["moves"])
    # Its tie-breaks keep the value but not the wins: as O they leave more than 5 points of the limit.
    assert sum(m["regret"] for m in result["O"]["moves"]) > 0.05 and len(result["O"]["moves"]) > 10


def test_an_invalid_reply_gives_up_the_wins_from_there():
    class Centre:
        def __call__(self, conversations):
            return [Reply("<move>4</move>") for _ in conversations]

    result = win_regret(load_environment("tictactoe"), Centre())
    side = result["X"]  # 4, then 4 again after each of the 8 random replies: invalid, the walk stops there
    invalid = [m for m in side["moves"] if m["move"] is None]
    assert len(invalid) == 8 and side["wins"] == 0.0
    assert all(m["reach"] == 1 / 8 and m["regret"] == best_wins(m["board"]) / 8 for m in invalid)
    assert side["wins"] == pytest.approx(side["limit"] - sum(m["regret"] for m in side["moves"]), abs=1e-9)


@pytest.mark.parametrize("answer", ["04", "²"])
def test_a_cell_the_env_does_not_read_is_an_invalid_move(answer):
    class Odd:
        def __call__(self, conversations):
            return [Reply(f"<move>{answer}</move>") for _ in conversations]

    # The env reads only the digits 0-8 as cells: "04" is no move, "²" neither (and no crash).
    side = win_regret(load_environment("tictactoe"), Odd())["X"]
    assert side["wins"] == 0.0 and [m["move"] for m in side["moves"]] == [None]
    assert side["moves"][0]["regret"] == pytest.approx(side["limit"])


def test_a_missed_win_in_one_is_flagged():
    class Blocker(WinMaximiser):
        """The limit's play, except that it blocks the opponent's line when it could complete its own."""

        def choose(self, board: str) -> int:
            me = to_move(board)
            them = "O" if me == "X" else "X"
            wins = [c for c in legal_moves(board) if winner(play(board, c, me)) == me]
            blocks = [c for c in legal_moves(board) if winner(play(board, c, them)) == them and c not in wins]
            return blocks[0] if wins and blocks else super().choose(board)

    result = win_regret(load_environment("tictactoe"), Blocker())
    moves = [m for side in result.values() for m in side["moves"]]
    assert moves and all(m["missed_win"] and m["move"] not in m["best"] for m in moves)
    assert all(
        not m["missed_win"]
        for m in win_regret(load_environment("tictactoe"), MinimaxPlayer(0.0))["O"]["moves"]
    )
