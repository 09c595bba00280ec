"""Where a greedy policy loses wins against a random player: each move's regret, weighted by how often it is played.

Against a uniformly random opponent, the best play that never gives up the minimax value (so it never loses to
anyone) wins 0.9948 of its games as X and 0.9164 as O. By the performance-difference identity, a deterministic
policy's shortfall from that limit is the sum, over the positions it reaches, of reach x (the limit's value there
- the value of the policy's move with the limit's play after it). Listing the terms names the positions to fix:
`python -m envs.tictactoe.regret MODEL_DIR`.
"""

from __future__ import annotations

import argparse

from envs.tictactoe.board import legal_moves, optimal_moves, play, winner
from envs.tictactoe.exact import best_value, memoized, move_value, opponent_branches, side_starts
from envs.tictactoe.game import TicTacToeGame
from envs.tictactoe.trained_models import add_model_options, trained
from wander.core.policy import Policy

RANDOM = 1.0  # the opponent's random-move probability


def best_wins(board: str) -> float:
    """Wins against a random player from `board`, by the best value-keeping play (a draw counts 0)."""
    return best_value(board, RANDOM, draw=0.0)


def move_wins(board: str, cell: int) -> float:
    """Wins against a random player after the player to move plays `cell`, by the best value-keeping play after."""
    return move_value(board, cell, RANDOM, draw=0.0)


def win_regret(env: TicTacToeGame, policy: Policy) -> dict:
    """Per side: the policy's exact wins against a random player, the limit, and every move with a regret."""
    policy = memoized(policy)
    out = {}
    for mark, episodes in side_starts(env).items():
        starts = [(1.0 / len(episodes), ep) for ep in episodes]  # as O, each of the nine openings alike
        limit = sum(reach * best_wins(ep.state["board"]) for reach, ep in starts)
        wins, moves = _walk(env, policy, starts, mark)
        merged: dict[tuple, dict] = {}  # a position reached by several move orders: one entry
        for m in moves:
            key = (m["board"], m["move"])
            if key in merged:
                merged[key]["reach"] += m["reach"]
                merged[key]["regret"] += m["regret"]
            else:
                merged[key] = m
        out[mark] = {
            "wins": wins,
            "limit": limit,
            "moves": sorted(merged.values(), key=lambda m: -m["regret"]),
        }
    return out


def _walk(env: TicTacToeGame, policy: Policy, frontier: list, mark: str) -> tuple[float, list[dict]]:
    wins, moves = 0.0, []
    while frontier:
        replies = policy([env.observation(ep) for _, ep in frontier])
        children = []
        for (reach, episode), reply in zip(frontier, replies, strict=True):
            board = episode.state["board"]
            cell = env.move_of(reply.content, board)
            if cell is None:  # an invalid reply gives up every win from here
                moves.append(_move(board, mark, None, reach, best_wins(board)))
                continue
            regret = best_wins(board) - move_wins(board, cell)
            if abs(regret) > 1e-12:
                moves.append(_move(board, mark, cell, reach, regret))
            children += [(reach * p, child) for p, child in opponent_branches(env, 1.0, episode, reply)]
        frontier = []
        for reach, child in children:
            if child.done:
                wins += reach * (child.state["outcome"] == "win")
            else:
                frontier.append((reach, child))
    return wins, moves


def _move(board: str, mark: str, cell: int | None, reach: float, value_lost: float) -> dict:
    best = [c for c in optimal_moves(board) if move_wins(board, c) > best_wins(board) - 1e-12]
    return {
        "board": board,
        "mark": mark,
        "move": cell,
        "best": best,
        "reach": reach,
        "regret": reach * value_lost,
        # A line to complete at once was there and the move did not (measured: half of a trained model's regret).
        "missed_win": cell is not None
        and any(winner(play(board, c, mark)) == mark for c in legal_moves(board)),
    }


def main() -> None:
    """Print a model's wins against a random player, the limits, and its largest regrets."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a model folder (e.g. data/models/grpo/polish)")
    parser.add_argument("--top", type=int, default=20, help="moves to list per side")
    add_model_options(parser)
    args = parser.parse_args()
    env, (policy,) = trained(args, args.model)
    for mark, side in win_regret(env, policy).items():
        total = sum(m["regret"] for m in side["moves"])
        missed = sum(m["regret"] for m in side["moves"] if m["missed_win"])
        print(
            f"as {mark}: wins {side['wins']:.4f} of {side['limit']:.4f}; {len(side['moves'])} moves, regret {total:.4f}"
            f", of which missed wins in one {missed:.4f}"
        )
        for m in side["moves"][: args.top]:
            b = m["board"]
            print(
                f"  {m['regret']:.4f}  {b[:3]}/{b[3:6]}/{b[6:]}  played {m['move']}  best {m['best']}  reach {m['reach']:.4f}"
                + ("  (missed a win in one)" if m["missed_win"] else "")
            )


if __name__ == "__main__":
    main()
