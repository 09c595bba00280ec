"""The model CLIs ask a model in the settings it was trained in: the project's params.yaml, or --env."""

import argparse
from pathlib import Path

import pytest
import yaml

from envs.tictactoe.trained_models import add_env_option, run_settings, trained


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_env_option(parser)
    return parser.parse_args(argv)


@pytest.fixture
def chat_params(tmp_path: Path) -> Path:
    """A params.yaml as `make run PROFILE=llm` leaves it: lines, bf16 where the hardware has it."""
    path = tmp_path / "params.yaml"
    env = {"name": "tictactoe", "tictactoe": {"rendering": "lines", "random_move_prob": [0.0, 1.0]}}
    path.write_text(yaml.safe_dump({"env": env, "evaluate": {"bf16": None}}))
    return path


def test_the_params_files_env_block_and_precision_are_the_defaults(chat_params: Path) -> None:
    assert run_settings(chat_params) == {
        "env": {"rendering": "lines", "random_move_prob": [0.0, 1.0]},
        "bf16": None,
    }
    env, policies = trained(_args(["--params", str(chat_params)]))
    assert env.config.rendering == "lines" and policies == []


def test_env_json_wins_over_the_params_file(chat_params: Path) -> None:
    env, _ = trained(_args(["--params", str(chat_params), "--env", '{"rendering": "spaced"}']))
    assert env.config.rendering == "spaced"


def test_without_a_params_file_the_env_defaults_and_float32(tmp_path: Path) -> None:
    assert run_settings(tmp_path / "missing.yaml") == {"env": {}, "bf16": False}
    env, _ = trained(_args(["--params", str(tmp_path / "missing.yaml")]))
    assert env.config.rendering == "board"
