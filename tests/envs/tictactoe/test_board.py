"""Rules and minimax values, checked on every reachable position rather than a sample."""

from functools import cache

from envs.tictactoe.board import (
    EMPTY_BOARD,
    STATES,
    best_moves,
    is_over,
    legal_moves,
    opponent_move,
    optimal_moves,
    play,
    to_move,
    value,
    winner,
)


def all_reachable() -> set[str]:
    seen, frontier = {EMPTY_BOARD}, [EMPTY_BOARD]
    while frontier:
        board = frontier.pop()
        if winner(board) or "." not in board:
            continue
        for cell in range(9):
            if board[cell] == ".":
                child = play(board, cell, to_move(board))
                if child not in seen:
                    seen.add(child)
                    frontier.append(child)
    return seen


@cache
def plain_value(board: str) -> int:
    """Textbook negamax without depth preference: an independent oracle."""
    if winner(board):
        return -1
    if "." not in board:
        return 0
    return max(-plain_value(play(board, c, to_move(board))) for c in range(9) if board[c] == ".")


def test_solver_covers_exactly_the_5478_reachable_positions():
    assert set(STATES) == all_reachable()
    assert len(STATES) == 5478


def test_rules_on_every_position():
    for board in STATES:
        assert abs(board.count("X") - board.count("O") - 0.5) == 0.5  # X leads by 0 or 1
        moves = legal_moves(board)
        assert bool(moves) == (not is_over(board))
        assert all(board[c] == "." for c in moves)
        if winner(board) == "X":
            assert to_move(board) == "O"  # X only wins on its own move


def test_minimax_values_match_an_independent_oracle_everywhere():
    for board in STATES:
        assert value(board) == plain_value(board)
        if not is_over(board):
            mark = to_move(board)
            assert set(best_moves(board)) <= set(optimal_moves(board))
            for cell in optimal_moves(board):
                assert -plain_value(play(board, cell, mark)) == value(board)
            if value(board) >= 0:
                for cell in set(legal_moves(board)) - set(optimal_moves(board)):
                    assert -plain_value(play(board, cell, mark)) < value(board)


def test_perfect_play_from_the_empty_board_is_a_draw():
    assert value(EMPTY_BOARD) == 0


def test_best_moves_prefer_faster_wins_and_slower_losses():
    # X can win at once on 2 (top row) or later elsewhere: the immediate win is the only best move.
    assert best_moves("XX.OO....") == (2,)
    # O to move is lost whatever it does; blocking 6 loses slowest, so it is the only best move.
    assert value(".....O.XX") == -1
    assert best_moves(".....O.XX") == optimal_moves(".....O.XX") == (6,)


def test_minimax_never_loses_to_any_player():
    """Minimax (every tie branch) as X and as O against every possible move sequence."""

    def never_loses(board: str, me: str) -> bool:
        if is_over(board):
            return winner(board) != ("O" if me == "X" else "X")
        mark = to_move(board)
        replies = best_moves(board) if mark == me else legal_moves(board)
        return all(never_loses(play(board, c, mark), me) for c in replies)

    assert never_loses(EMPTY_BOARD, "X")
    assert never_loses(EMPTY_BOARD, "O")


def test_opponent_is_a_pure_function_of_seed_and_board():
    for board in STATES[:500]:
        if is_over(board):
            continue
        assert opponent_move(board, 7, 0.3) == opponent_move(board, 7, 0.3)
        assert opponent_move(board, 7, 0.0) in best_moves(board)
        assert opponent_move(board, 7, 1.0) in legal_moves(board)


def test_opponent_breaks_ties_across_all_best_moves_and_randomises_at_its_rate():
    chosen = {opponent_move(EMPTY_BOARD, seed, 0.0) for seed in range(500)}
    assert chosen == set(range(9))
    board = "XX.OO...."  # X to move: the only best move is 2
    random_share = sum(opponent_move(board, s, 0.4) != 2 for s in range(4000)) / 4000
    # A random move hits cell 2 one time in 5 (5 legal moves): expected share 0.4 * 4/5 = 0.32.
    assert 0.29 < random_share < 0.35
