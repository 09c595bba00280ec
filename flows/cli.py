"""The `wander` command line."""

from __future__ import annotations

import argparse
import json
import sys

from envs import load_environment
from envs.tictactoe.players import opponent_skill, scripted_player


def eval_command(args: argparse.Namespace) -> int:
    """Play a policy against each opponent and print win/draw/loss with 95% intervals."""
    policy = scripted_player(args.policy, seed=args.seed)
    rows = []
    for name in args.opponents.split(","):
        p = opponent_skill(name)
        env = load_environment("tictactoe", random_move_prob=(p, p), num_eval=args.games, seed=args.seed)
        m = env.evaluate(policy, split="eval").metrics
        rows.append({"opponent": name, **{k: m[k] for k in ("win", "draw", "loss", "invalid_moves")}})
    print(f"{args.policy} over {args.games} games per opponent (95% Wilson intervals)")
    print(f"{'opponent':<14}{'win':>22}{'draw':>22}{'loss':>22}")
    for r in rows:
        cells = "".join(
            f"{r[k]['mean']:>8.3f} [{r[k]['ci_low']:.3f},{r[k]['ci_high']:.3f}]"
            for k in ("win", "draw", "loss")
        )
        print(f"{r['opponent']:<14}{cells}")
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="wander", description="Train small LMs with RL inside environments."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("eval", help="play a policy against tic-tac-toe opponents")
    ev.add_argument("--policy", default="minimax", help="random, minimax[-P] or expert[-P]")
    ev.add_argument("--opponents", default="random,minimax-0.5,minimax-0", help="comma-separated opponents")
    ev.add_argument("--games", type=int, default=200, help="games per opponent")
    ev.add_argument("--seed", type=int, default=0, help="split seed and policy seed")
    ev.add_argument("--json", action="store_true", help="also print the rows as JSON")
    ev.set_defaults(func=eval_command)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of `wander`."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:
        print(f"wander: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
