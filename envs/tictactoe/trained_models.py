"""What the model CLIs (`exploit`, `regret`, `greedy_changes`) share: the env a model was trained in, and the model
greedy, as the pipeline evaluates it.

A model answers the prompts it was trained on: the chat profile's model reads `rendering: lines`, so a CLI that
asked it the default `board` prompts would measure another game. `--env` takes the settings of params.yaml's
`env.tictactoe` block as JSON (the chat profile: `--env '{"rendering": "lines"}' --bf16`).
"""

from __future__ import annotations

import argparse
import json

from envs.tictactoe.game import TicTacToeGame
from wander.core.policy import Policy


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """`--env JSON` and `--bf16`: the settings and the precision the models are asked in."""
    parser.add_argument(
        "--env",
        default="{}",
        help="the env's settings as JSON, as the model was trained (params.yaml's env.tictactoe block)",
    )
    parser.add_argument(
        "--bf16",
        action="store_true",
        help="bf16 autocast where the hardware computes it, as the chat profile's evaluate stage (default float32)",
    )


def trained(args: argparse.Namespace, *models: str) -> tuple[TicTacToeGame, list[Policy]]:
    """The env of `args.env`, and each model folder as a greedy policy with that env's reply length."""
    from wander.core.registry import load_environment
    from wander.policies.transformers_policy import TransformersPolicy

    try:
        settings = json.loads(args.env)
    except json.JSONDecodeError as e:
        raise SystemExit(f'--env is not JSON ({e}); write e.g. --env \'{{"rendering": "lines"}}\'') from None
    env = load_environment("tictactoe", **settings)
    bf16 = None if args.bf16 else False  # None: where the hardware computes it
    policies = [
        TransformersPolicy.from_pretrained(path, greedy=True, max_new_tokens=env.reply_tokens(), bf16=bf16)
        for path in models
    ]
    return env, policies
