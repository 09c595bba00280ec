"""greedy_changes counts the moves one policy plays differently from another over the first one's exact positions."""

from envs.tictactoe.greedy_changes import greedy_changes
from wander import load_environment

from .test_exploit import BlocksFirst, FirstOptimal


def test_the_changed_moves_are_counted_by_whether_they_keep_the_value():
    env = load_environment("tictactoe", history="current")
    same = greedy_changes(env, FirstOptimal(), FirstOptimal())
    assert same["positions"] > 100 and same["changed"] == same["wrong_before"] == same["wrong_after"] == 0
    worse = greedy_changes(env, FirstOptimal(), BlocksFirst())  # blocks where it could win
    assert worse["changed"] > 0 and worse["right_to_wrong"] > 0 and worse["wrong_to_right"] == 0
    assert worse["wrong_after"] == worse["right_to_wrong"] and worse["changed"] >= worse["right_to_wrong"]
    back = greedy_changes(env, BlocksFirst(), FirstOptimal())
    assert back["wrong_to_right"] == back["wrong_before"] > 0 and back["right_to_wrong"] == 0
