"""params.yaml into typed stage configs: every key checked, errors name the key, the section and the type."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from tasks.build_model_config import BuildModelConfig
from tasks.curate_config import CurateConfig
from tasks.generate_config import GenerateConfig
from tasks.params import Layout, ParamsError, check_params, load_config, main, read_params
from tasks.synthesize_config import SynthesizeConfig

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def params() -> dict:
    return read_params(REPO / "params.yaml")


@pytest.mark.parametrize("profile", [None, "smoke"])
def test_every_section_of_the_repo_params_loads(profile: str | None) -> None:
    params = read_params(REPO / "params.yaml", profile)
    configs = check_params(params)
    assert isinstance(configs["generate"], GenerateConfig)
    assert isinstance(configs["build_model"], BuildModelConfig)
    assert isinstance(configs["synthesize"], SynthesizeConfig)
    assert isinstance(configs["curate"], CurateConfig)
    assert configs["env"]["random_move_prob"] == (0.0, 1.0)  # a YAML list read as the declared tuple


def test_smoke_profile_shrinks_budgets_but_keeps_the_layout() -> None:
    full = read_params(REPO / "params.yaml")
    smoke = read_params(REPO / "params.yaml", "smoke")
    assert smoke["layout"] == full["layout"]
    assert smoke["generate"]["num_train"] < full["generate"]["num_train"]
    assert smoke["generate"]["seed"] == full["generate"]["seed"]  # untouched keys come from params.yaml
    assert smoke["build_model"]["scratch"]["hidden_size"] < full["build_model"]["scratch"]["hidden_size"]


def test_unknown_key_names_key_section_and_suggestion(params: dict) -> None:
    params["generate"]["num_trian"] = 10
    with pytest.raises(ParamsError) as e:
        load_config(GenerateConfig, "generate", params)
    message = str(e.value)
    assert "'num_trian'" in message and "'generate'" in message and "did you mean 'num_train'" in message


@pytest.mark.parametrize(
    ("section", "key", "value", "expected"),
    [
        ("generate", "num_train", "many", "expects int, got str 'many'"),
        ("generate", "seed", True, "expects int, got bool"),
        ("synthesize", "teacher_skill", "high", "expects float, got str"),
        ("synthesize", "teacher_url", 8000, "expects str or None, got int"),
        ("curate", "allowed_outcomes", "win", "expects list[str], got str"),
        ("curate", "dedupe", "yes", "expects bool, got str"),
    ],
)
def test_mistyped_key_names_key_section_and_expected_type(
    params: dict, section: str, key: str, value: object, expected: str
) -> None:
    params[section][key] = value
    cls = {"generate": GenerateConfig, "synthesize": SynthesizeConfig, "curate": CurateConfig}[section]
    with pytest.raises(ParamsError, match=re.escape(f"section '{section}': key '{key}' {expected}")):
        load_config(cls, section, params)


def test_ints_widen_to_floats_and_lists_to_tuples(params: dict) -> None:
    params["synthesize"]["teacher_skill"] = 0
    params["synthesize"]["requests_per_second"] = 5
    config = load_config(SynthesizeConfig, "synthesize", params)
    assert config.teacher_skill == 0.0 and isinstance(config.teacher_skill, float)
    assert config.requests_per_second == 5.0


def test_nested_config_keys_are_checked_by_path(params: dict) -> None:
    params["build_model"]["scratch"]["hidden_sise"] = 64
    with pytest.raises(
        ParamsError, match=r"section 'build_model': unknown key 'scratch.hidden_sise'.*'scratch.hidden_size'"
    ):
        load_config(BuildModelConfig, "build_model", params)
    params["build_model"]["scratch"] = {"hidden_size": "wide"}
    with pytest.raises(ParamsError, match="key 'scratch.hidden_size' expects int"):
        load_config(BuildModelConfig, "build_model", params)


def test_env_section_is_checked_against_the_env_config(params: dict) -> None:
    bad = copy.deepcopy(params)
    bad["env"]["max_turn"] = 9
    with pytest.raises(ParamsError, match="section 'env': unknown key 'max_turn'.*did you mean 'max_turns'"):
        load_config(GenerateConfig, "generate", bad)
    bad = copy.deepcopy(params)
    bad["env"]["random_move_prob"] = [0.0, "one"]
    with pytest.raises(ParamsError, match=r"key 'random_move_prob\[1\]' expects float"):
        load_config(GenerateConfig, "generate", bad)
    bad = copy.deepcopy(params)
    bad["env"]["rendering"] = "fancy"
    with pytest.raises(ParamsError, match="section 'env': rendering must be 'compact' or 'grid'"):
        load_config(GenerateConfig, "generate", bad)
    bad = copy.deepcopy(params)
    bad["env"]["random_move_prob"] = [0.0, 0.5, 1.0]
    with pytest.raises(ParamsError, match=r"expects tuple\[float, float\]"):
        load_config(GenerateConfig, "generate", bad)


def test_config_rules_fail_as_params_errors_naming_the_section(params: dict) -> None:
    params["generate"]["num_eval"] = 0
    with pytest.raises(ParamsError, match="section 'generate': num_train, num_eval and num_test"):
        load_config(GenerateConfig, "generate", params)
    params["generate"]["num_eval"] = 10
    params["env"]["seed"] = 3
    with pytest.raises(ParamsError, match=r"env sets \['seed'\], which belong to the generate section"):
        load_config(GenerateConfig, "generate", params)


def test_paths_come_from_the_layout_unless_the_section_sets_them(params: dict) -> None:
    params["layout"]["datasets"] = "elsewhere/specs"
    config = load_config(SynthesizeConfig, "synthesize", params)
    assert config.specs_dir == "elsewhere/specs"
    assert config.output_dir == Layout().episodes
    params["synthesize"]["specs_dir"] = "mine"
    assert load_config(SynthesizeConfig, "synthesize", params).specs_dir == "mine"
    params["layout"]["dataset"] = "typo"
    with pytest.raises(ParamsError, match="section 'layout': unknown key 'dataset'"):
        load_config(SynthesizeConfig, "synthesize", params)


def test_missing_section_and_unknown_section(params: dict) -> None:
    del params["curate"]
    with pytest.raises(ParamsError, match="no section 'curate'"):
        load_config(CurateConfig, "curate", params)
    params["curation"] = {}
    with pytest.raises(ParamsError, match=r"unknown section\(s\) \['curation'\]"):
        check_params(params)


def _profile_dir(tmp_path: Path, overrides: dict) -> Path:
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    (tmp_path / "params.try.yaml").write_text(yaml.safe_dump(overrides))
    return tmp_path / "params.yaml"


def test_profile_may_not_change_the_layout_or_add_keys(tmp_path: Path) -> None:
    path = _profile_dir(tmp_path, {"layout": {"datasets": "x"}})
    with pytest.raises(ParamsError, match="may not change 'layout'"):
        read_params(path, "try")
    path = _profile_dir(tmp_path, {"generate": {"num_trian": 5}})
    with pytest.raises(ParamsError, match="overrides 'generate.num_trian'"):
        read_params(path, "try")
    with pytest.raises(ParamsError, match=r"no profile 'nope'.*params\.try\.yaml"):
        read_params(path, "nope")


def test_cli_writes_the_merged_profile(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "params.yaml"
    assert main(["--params", str(REPO / "params.yaml"), "--profile", "smoke", "--write", str(out)]) == 0
    assert read_params(out) == read_params(REPO / "params.yaml", "smoke")
    (tmp_path / "other").mkdir()
    bad = _profile_dir(tmp_path / "other", {"generate": {"seed": "s"}})
    assert main(["--params", str(bad), "--profile", "try"]) == 2
    assert "section 'generate': key 'seed' expects int" in capsys.readouterr().err


def test_a_stage_command_refuses_bad_params_before_doing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from tasks import generate
    from tasks.stage import stage_main

    params = read_params(REPO / "params.yaml")
    params["layout"]["datasets"] = str(tmp_path / "datasets")
    params["generate"]["num_trian"] = 10
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    assert (
        stage_main("generate", generate.run, ["--params", str(tmp_path / "params.yaml"), "--no-mlflow"]) == 2
    )
    err = capsys.readouterr().err
    assert "generate: error:" in err and "section 'generate': unknown key 'num_trian'" in err
    assert not (tmp_path / "datasets").exists()
