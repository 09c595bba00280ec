"""An env's recipe (tasks/params/recipe.py): the params keys params.yaml leaves null come from the selected env's
recipe.yaml, a value set in params.yaml or a profile wins, and DVC sees the file."""

from __future__ import annotations

import functools
import operator
import sys
from pathlib import Path

import pytest
import yaml

from tasks.params.load import ParamsError, load_params, read_params
from tasks.params.recipe import RECIPE_KEYS, recipe_line, recipe_of
from tasks.params.sections import Params
from wander.core.registry import environment_names

REPO = Path(__file__).resolve().parents[2]


def with_env(name: str, **sections: dict) -> dict:
    """params.yaml with env `name` selected and `sections` merged over their sections."""
    params = read_params(REPO / "params.yaml")
    params["env"]["name"] = name
    for section, values in sections.items():
        params[section] = {**params[section], **values}
    return params


def test_every_recipe_key_is_null_in_params_yaml_and_documented() -> None:
    params = read_params(REPO / "params.yaml")
    for key in RECIPE_KEYS:
        section, field, *_ = key.split(".")
        assert functools.reduce(operator.getitem, key.split("."), params) is None, (
            f"params.yaml sets {key}: the recipe would never apply"
        )
        docs = Params.model_fields[section].annotation.model_fields[field].description
        nested = key.count(".") > 1  # a field of a library config: the section's docs name it
        assert "recipe" in docs and (not nested or key.split(".")[-1] in docs), key


@pytest.mark.parametrize("name", environment_names())
def test_every_env_of_the_catalogue_has_a_whole_recipe_the_params_model_accepts(name: str) -> None:
    path, recipe = recipe_of(name)
    assert path == REPO / "envs" / name / "recipe.yaml" and set(recipe) == set(RECIPE_KEYS)
    loaded = load_params(params=with_env(name))
    for key, value in recipe.items():
        # the curriculum, as typed stages: each with the fields it sets and env settings
        if key == "grpo.stages":
            stages = {
                k: {field: getattr(s, field) for field in {"env", *value[k]}}
                for k, s in loaded.grpo.stages.items()
            }
            assert stages == {k: {"env": {}, **s} for k, s in value.items()}
        else:
            assert functools.reduce(getattr, key.split("."), loaded) == value
    # A curriculum's stages differ in something: stages alike would replay each other's first steps.
    settings = [{**s.to_dict(), "name": None} for s in loaded.grpo.curriculum({}).values()]
    assert all(a != b for i, a in enumerate(settings) for b in settings[i + 1 :]), name


def test_the_selected_env_s_recipe_fills_the_null_keys_and_a_set_value_wins() -> None:
    # reverse_text's recipe trains SFT five times longer than tic-tac-toe's (docs/experiments/environments.md).
    assert load_params(params=with_env("tictactoe")).sft.num_train_epochs == 2.0
    reverse = load_params(params=with_env("reverse_text"))
    assert (reverse.sft.num_train_epochs, reverse.build_model.scratch.vocab_size) == (10.0, 259)  # bytes only
    chosen = with_env("reverse_text", sft={"num_train_epochs": 3.0})
    loaded = load_params(params=chosen)
    assert loaded.sft.num_train_epochs == 3.0 and loaded.sft.learning_rate == 0.0005
    line = recipe_line(chosen)
    assert line.startswith("recipe (null = env reverse_text's; envs/reverse_text/recipe.yaml): ")
    assert line.endswith(
        "build_model.scratch.vocab_size 259, sft.num_train_epochs 3.0 (set), sft.per_device_train_batch_size 8, "
        "sft.learning_rate 0.0005, grpo.learning_rate 5e-05, grpo.play_on sample, grpo.stages {main 180}"
    )
    # A profile's steps of every stage are the steps the line shows.
    assert recipe_line(with_env("tictactoe", grpo={"max_steps": 2})).endswith(
        "grpo.stages {wide 2, strong 2, polish 2}"
    )


def test_a_curriculum_set_in_params_replaces_the_env_s_whole() -> None:
    # The calculator's SFT takes eight times the updates of tic-tac-toe's over its rows (batch 8, not 64).
    assert load_params(params=with_env("calculator")).sft.per_device_train_batch_size == 8
    params = with_env("tictactoe")
    params["grpo"]["stages"] = {"only": {"max_steps": 7}, "wide": {"temperature": 0.7}}
    stages = load_params(params=params).grpo.stages
    assert list(stages) == ["only", "wide"]  # no stage of the env's added, none of its steps
    assert [(s.max_steps, s.temperature) for s in stages.values()] == [(7, 1.0), (100, 0.7)]
    assert recipe_line(params).endswith("grpo.stages {only 7, wide None} (set)")


def test_a_profile_value_wins_over_the_recipe() -> None:
    loaded = load_params(REPO / "params.yaml", profile="llm")
    assert (loaded.sft.num_train_epochs, loaded.sft.learning_rate) == (1.0, 0.0003)


@pytest.fixture
def own_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An env package outside the catalogue, `my_env`, importable by its module path."""
    package = tmp_path / "my_env"
    package.mkdir()
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield package
    sys.modules.pop("my_env", None)


def test_an_env_without_a_recipe_trains_with_the_default_env_s_and_the_line_says_so(own_env: Path) -> None:
    params = with_env("my_env")
    borrowed = load_params(params=params)
    assert borrowed.sft.num_train_epochs == 2.0
    # Tic-tac-toe's stages, without their settings of tic-tac-toe's opponents, which another env does not have.
    assert [(k, s.env) for k, s in borrowed.grpo.stages.items()] == [
        ("wide", {}),
        ("strong", {}),
        ("polish", {}),
    ]
    assert "env my_env's; it has none: envs/tictactoe/recipe.yaml" in recipe_line(params)
    (own_env / "recipe.yaml").write_text(
        "build_model: {scratch: {vocab_size: 300}}\n"
        "sft: {num_train_epochs: 4.0, learning_rate: 1.0e-4, per_device_train_batch_size: 8}\n"
        "grpo: {learning_rate: 2.0e-5, play_on: sample, stages: {wide: {max_steps: 3}, strong: {max_steps: 2, temperature: 0.5}}}\n"
    )
    loaded = load_params(params=params)
    assert loaded.build_model.scratch.vocab_size == 300
    assert loaded.sft.per_device_train_batch_size == 8
    assert [stage.max_steps for stage in loaded.grpo.stages.values()] == [3, 2]
    assert (loaded.sft.num_train_epochs, loaded.sft.learning_rate, loaded.grpo.learning_rate) == (
        4.0,
        1e-4,
        2e-5,
    )


def test_a_recipe_with_a_foreign_or_missing_key_is_refused_naming_both(own_env: Path) -> None:
    (own_env / "recipe.yaml").write_text(
        yaml.safe_dump(
            {
                "build_model": {"scratch": {"vocab_size": 300}},
                "sft": {"num_train_epochs": 4.0, "max_length": 99},
                "grpo": {"learning_rate": 1e-5},
            }
        )
    )
    with pytest.raises(ParamsError) as caught:
        load_params(params=with_env("my_env"))
    message = str(caught.value)
    assert "recipe.yaml: a recipe sets exactly" in message
    assert (
        "['sft.max_length'] belong in params.yaml" in message
        and "add ['grpo.play_on', 'grpo.stages'" in message
    )


def test_a_recipe_value_the_params_model_refuses_names_the_key(own_env: Path) -> None:
    (own_env / "recipe.yaml").write_text(
        "build_model: {scratch: {vocab_size: 300}}\n"
        "sft: {num_train_epochs: many, learning_rate: 1.0e-4, per_device_train_batch_size: 8}\n"
        "grpo: {learning_rate: 2.0e-5, play_on: sample, stages: {wide: {max_steps: 3}, strong: {max_steps: 2}, polish: {max_steps: 1}}}\n"
    )
    with pytest.raises(ParamsError, match=r"section 'sft': key 'num_train_epochs' expects float or None"):
        load_params(params=with_env("my_env"))


def test_the_stages_that_read_a_recipe_key_depend_on_the_recipe_file() -> None:
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    readers = {key.split(".")[0] for key in RECIPE_KEYS}
    for name in readers:
        deps = stages[name].get("deps") or stages[name]["do"]["deps"]
        assert {"envs/${env.name}/recipe.yaml", "envs/${env.name}"} & set(deps), name
