"""What the model CLIs (`exploit`, `regret`, `greedy_changes`) share: the env a model was trained in, and the model
as the pipeline evaluates it (greedy, in the evaluate stage's precision).

A model answers the prompts it was trained on: the chat profile's model reads `rendering: lines`, so a CLI that
asked it `board` prompts would measure another game. The settings come from `--env` (JSON), else from the project's
params.yaml (what `make run` trained with), else the env's defaults.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

from envs.tictactoe.game import TicTacToeGame
from wander.core.policy import Policy

PARAMS = Path("params.yaml")


def add_env_option(parser: argparse.ArgumentParser) -> None:
    """`--env JSON` and `--params PATH`, the settings the models are asked in."""
    parser.add_argument(
        "--env",
        default=None,
        help="the env's settings as JSON; default: the params file's env.tictactoe block",
    )
    parser.add_argument(
        "--params",
        type=Path,
        default=PARAMS,
        help="the params file the models were trained with (params.yaml)",
    )


def run_settings(params: Path) -> dict[str, Any]:
    """params.yaml's `env.tictactoe` block and `evaluate.bf16`, as `{"env": ..., "bf16": ...}`; the defaults
    (`{}`, float32) when the file does not exist."""
    if not params.exists():
        return {"env": {}, "bf16": False}
    loaded = yaml.safe_load(params.read_text()) or {}
    env = (loaded.get("env") or {}).get("tictactoe") or {}
    return {"env": dict(env), "bf16": (loaded.get("evaluate") or {}).get("bf16", False)}


def trained(args: argparse.Namespace, *models: str) -> tuple[TicTacToeGame, list[Policy]]:
    """The env of `args.env` (else the params file's), and each model folder as a greedy policy in that env's reply
    length and the evaluate stage's precision."""
    from wander.core.registry import load_environment
    from wander.policies.transformers_policy import TransformersPolicy

    settings = run_settings(args.params)
    env = load_environment("tictactoe", **(json.loads(args.env) if args.env else settings["env"]))
    policies = [
        TransformersPolicy.from_pretrained(
            path, greedy=True, max_new_tokens=env.reply_tokens(), bf16=settings["bf16"]
        )
        for path in models
    ]
    return env, policies
