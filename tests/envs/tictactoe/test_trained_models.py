"""The model CLIs ask a model in the settings it was trained in (--env) and the precision asked for (--bf16)."""

import argparse

import pytest

from envs.tictactoe.trained_models import add_model_options, trained


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_model_options(parser)
    return parser.parse_args(argv)


def test_env_json_sets_the_prompts_the_models_are_asked() -> None:
    env, policies = trained(_args(["--env", '{"rendering": "lines"}']))
    assert env.config.rendering == "lines" and policies == []
    assert trained(_args([]))[0].config.rendering == "board"  # the env's defaults: the scratch model's
    assert _args(["--bf16"]).bf16 and not _args([]).bf16


def test_bad_env_json_or_settings_are_refused_before_any_model_loads() -> None:
    with pytest.raises(SystemExit, match="--env is not JSON"):
        trained(_args(["--env", "rendering=lines"]), "no/such/model")
    with pytest.raises(ValueError, match="rendering must be one of"):
        trained(_args(["--env", '{"rendering": "pictures"}']), "no/such/model")
