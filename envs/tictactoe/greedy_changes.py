"""Which greedy moves a training stage changed: two policies asked every position the first one's exact results ask,
each move checked with the solver. Measured on the chat model, one GRPO stage changed ~10% of those positions, as
many to a value-losing move as from one (docs/experiments/chat-model.md#three-seeds-from-fresh-clones):
`python -m envs.tictactoe.greedy_changes BEFORE_DIR AFTER_DIR --env '{"rendering": "lines"}' --bf16` (the chat profile).
"""

from __future__ import annotations

import argparse
import json

from envs.tictactoe.board import optimal_moves
from envs.tictactoe.exact import Memoized
from envs.tictactoe.game import TicTacToeGame
from envs.tictactoe.players import board_of
from envs.tictactoe.trained_models import add_model_options, trained
from wander.core.policy import Policy, Reply


def greedy_changes(env: TicTacToeGame, before: Policy, after: Policy) -> dict[str, int]:
    """Over the positions `before`'s exact results ask: how many moves changed, from a value-keeping move to a
    value-losing one and back, and the value-losing moves of each policy."""
    asked = Memoized(before)
    env.curve_metrics(asked)
    conversations = [json.loads(key) for key in asked.replies]
    out = dict.fromkeys(
        ("positions", "changed", "right_to_wrong", "wrong_to_right", "wrong_before", "wrong_after"), 0
    )
    # The cache's replies are in the order of its keys: each old reply beside its conversation.
    pairs = zip(conversations, asked.replies.values(), after(conversations), strict=True)
    for conversation, old, new in pairs:
        was, now = _keeps_value(env, conversation, old), _keeps_value(env, conversation, new)
        out["positions"] += 1
        out["changed"] += old.content != new.content
        out["right_to_wrong"] += was and not now
        out["wrong_to_right"] += now and not was
        out["wrong_before"] += not was
        out["wrong_after"] += not now
    return out


def _keeps_value(env: TicTacToeGame, conversation: list, reply: Reply) -> bool:
    board = board_of(conversation)
    cell = env.move_of(reply.content, board)
    return cell is not None and cell in optimal_moves(board)


def main() -> None:
    """Print the counts for two model folders, greedy, in the env the models were trained in."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="a model folder (e.g. data/models/sft)")
    parser.add_argument("after", help="a model folder (e.g. data/models/grpo/wide)")
    add_model_options(parser)
    args = parser.parse_args()
    env, (before, after) = trained(args, args.before, args.after)
    print(json.dumps(greedy_changes(env, before, after)))


if __name__ == "__main__":
    main()
