"""params.yaml into the typed params model: every key checked, errors name file, section, key and expected type."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from tasks.params.load import ParamsError, load_params, main, read_params, restrict
from tasks.params.sections import READS
from tasks.runtime.stage import headline

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def params() -> dict:
    return read_params(REPO / "params.yaml")


def error(params: dict) -> str:
    with pytest.raises(ParamsError) as e:
        load_params(params=params)
    return str(e.value)


def test_smoke_profile_shrinks_budgets_but_keeps_the_layout() -> None:
    full, smoke = load_params(REPO / "params.yaml"), load_params(REPO / "params.yaml", "smoke")
    assert smoke.layout == full.layout
    assert smoke.generate.num_train < full.generate.num_train and smoke.generate.seed == full.generate.seed
    assert smoke.build_model.scratch.hidden_size < full.build_model.scratch.hidden_size
    # A partial nested config changes only its own keys; the rest stay the section's values.
    assert (
        smoke.build_model.scratch.max_position_embeddings == full.build_model.scratch.max_position_embeddings
    )
    # The profile's one number of steps is every curriculum stage's; the rest of each stage stays the env's.
    shrunk, kept = smoke.grpo.curriculum({}), full.grpo.curriculum({})
    assert [s.max_steps for s in shrunk.values()] == [2, 2, 2] and [s.max_steps for s in kept.values()] == [
        40,
        60,
        80,
    ]
    assert shrunk["wide"].env_kwargs == kept["wide"].env_kwargs == {"random_move_prob": [0.0, 1.0]}


@pytest.mark.parametrize(
    ("section", "key", "value", "expected"),
    [
        (
            "generate",
            "num_trian",
            10,
            "unknown key 'num_trian' (did you mean 'num_train'?); known keys: num_eval,",
        ),
        ("generate", "num_train", "many", "key 'num_train' expects int, got str 'many'"),
        ("generate", "seed", True, "key 'seed' expects int, got bool True"),
        ("generate", "num_eval", 0, "key 'num_eval': input should be greater than or equal to 1, got int 0"),
        ("synthesize", "teacher_skill", "high", "key 'teacher_skill' expects float or None, got str 'high'"),
        ("synthesize", "teacher_url", 8000, "key 'teacher_url' expects str or None, got int 8000"),
        (
            "curate",
            "allowed_outcomes",
            "win",
            "key 'allowed_outcomes' expects list[str] or None",
        ),
        ("curate", "dedupe", "yes", "key 'dedupe' expects bool, got str 'yes'"),
        ("evaluate", "baseline", "teachr", "baseline 'teachr' is not a policy row"),
    ],
)
def test_bad_key_names_file_section_key_and_expected_type(
    params: dict, section: str, key: str, value: object, expected: str
) -> None:
    params[section][key] = value
    assert f"params.yaml: section '{section}': {expected}" in error(params)


def test_ints_widen_to_floats_and_yaml_exponents_are_floats(params: dict, tmp_path: Path) -> None:
    params["synthesize"]["teacher_skill"] = 0
    assert load_params(params=params).synthesize.teacher_skill == 0.0
    path = tmp_path / "params.yaml"
    path.write_text("grpo:\n  learning_rate: 3e-5\n")  # PyYAML alone reads this as a string
    assert load_params(path).grpo.learning_rate == 3e-5


def test_nested_library_configs_are_checked_by_path(params: dict) -> None:
    bad = copy.deepcopy(params)
    bad["build_model"]["scratch"]["hidden_sise"] = 64
    assert "section 'build_model': unknown key 'scratch.hidden_sise' (did you mean 'hidden_size'?)" in error(
        bad
    )
    bad = copy.deepcopy(params)
    bad["build_model"]["scratch"]["hidden_size"] = 130  # not divisible by the 4 heads
    assert "section 'build_model': key 'scratch': hidden_size (130) must divide by" in error(bad)
    bad = copy.deepcopy(params)
    bad["synthesize"]["teacher"]["max_retires"] = 3
    assert "unknown key 'teacher.max_retires' (did you mean 'max_retries'?)" in error(bad)
    bad = copy.deepcopy(params)
    bad["synthesize"]["teacher"]["base_url"] = "http://x/v1"
    assert "set synthesize.teacher_url" in error(bad)


def test_grpo_stages_are_typed_curriculum_stages(params: dict) -> None:
    # params.yaml's null is the env's curriculum; a curriculum set in params replaces it whole and is checked.
    assert params["grpo"]["stages"] is None
    stages = load_params(params=params).grpo.stages
    assert list(stages) == ["wide", "strong", "polish"]  # tic-tac-toe's recipe
    assert stages["wide"].name == "wide" and stages["wide"].env == {"random_move_prob": [0.0, 1.0]}
    assert stages["strong"].batch_size == params["grpo"]["batch_size"]
    params["grpo"]["stages"] = {"only": {"max_steps": 3, "env": {"random_move_prob": [0.2, 0.4]}}}
    loaded = load_params(params=params)
    assert list(loaded.grpo.stages) == ["only"] and loaded.grpo.stages["only"].max_steps == 3
    assert list(loaded.evaluate.policies) == ["base", "sft", "grpo-only", "teacher"]  # the rows follow
    assert (
        loaded.register.candidate == "grpo-only"
        and loaded.register.lineage["grpo-only"] == "data/models/grpo/only"
    )
    params["grpo"]["stages"] = {"wide": {"max_step": 3}}
    assert "section 'grpo': unknown key 'stages.wide.max_step' (did you mean 'max_steps'?)" in error(params)
    params["grpo"]["stages"] = {"wide": {"temperature": 0.0}}
    assert "stage 'wide': temperature must be positive" in error(params)
    # A stage's env settings are its env block, checked against the env's config merged over env.<name>.
    params["grpo"]["stages"] = {"wide": {"random_move_prob": [0.0, 0.5]}}
    assert (
        "stage 'wide': write random_move_prob in the stage's env block, e.g. env: {random_move_prob:"
        in error(params)
    )
    params["grpo"]["stages"] = {"wide": {"env": {"random_move_prob": [0.0, 0.5, 1.0]}}}
    assert "section 'grpo.stages.wide.env': key 'random_move_prob'" in error(params)
    params["grpo"]["stages"] = {"wide": {"env": {"invalid_penalti": -1.0}}}
    assert "unknown key 'invalid_penalti' (did you mean 'invalid_penalty'?)" in error(params)
    params["grpo"]["stages"] = None
    params["grpo"]["env"] = {"tictactactoe": {"invalid_penalty": -1.0}}
    assert "section 'grpo.env': no environment is named 'tictactactoe'" in error(params)


def test_env_section_is_checked_against_the_env_config(params: dict) -> None:
    cases = [
        ("max_turn", 9, "section 'env.tictactoe': unknown key 'max_turn' (did you mean 'max_turns'?)"),
        (
            "random_move_prob",
            [0.0, "one"],
            "section 'env.tictactoe': key 'random_move_prob[1]' expects float, got str",
        ),
        (
            "rendering",
            "fancy",
            "section 'env.tictactoe': rendering must be one of grid, compact, board, spaced, lines",
        ),
        ("seed", 3, "section 'env.tictactoe': ['seed'] are set by the pipeline (seed from generate)"),
    ]
    for key, value, expected in cases:
        bad = copy.deepcopy(params)
        bad["env"]["tictactoe"][key] = value
        assert expected in error(bad)
    assert load_params(params=params).env.settings()["random_move_prob"] == (0.0, 1.0)  # as the env reads it
    # A setting outside its env's block, or a block no env is named like, says where settings go.
    bad = copy.deepcopy(params)
    bad["env"]["history"] = "full"
    assert (
        "env.history = 'full': an environment's settings live in its own block, env.<name>.history"
        in error(bad)
    )
    bad = copy.deepcopy(params)
    bad["env"]["tic-tac-toe"] = {"history": "full"}
    assert "env.tic-tac-toe: no environment is named 'tic-tac-toe'" in error(bad)


def test_env_name_alone_switches_the_environment(params: dict) -> None:
    # `dvc exp run -S env.name=reverse_text`: tic-tac-toe's blocks stay, unread; the other env plays its defaults.
    params["env"]["name"] = "reverse_text"
    loaded = load_params(params=params)
    assert loaded.env.kwargs() == {"name": "reverse_text", **params["env"]["reverse_text"]}
    del params["env"]["reverse_text"]
    assert load_params(params=params).env.kwargs() == {"name": "reverse_text"}  # no block: its defaults
    # The curriculum is the played env's: reverse_text's one stage, not tic-tac-toe's opponent ranges.
    stages = loaded.grpo.curriculum(loaded.grpo.env.get("reverse_text", {}))
    assert list(stages) == ["main"] and stages["main"].env_kwargs == {} and stages["main"].max_steps == 180
    assert list(loaded.evaluate.policies) == ["base", "sft", "grpo-main", "teacher"]
    tictactoe = load_params(params={**params, "env": {"name": "tictactoe"}}).grpo
    assert tictactoe.curriculum(tictactoe.env["tictactoe"])["wide"].env_kwargs == {
        "invalid_penalty": -0.5,
        "value_loss_penalty": 0.0,
        "random_move_prob": [0.0, 1.0],
    }
    # Rows the env adds: its references after the policies (tic-tac-toe: minimax and random).
    evaluate = loaded.evaluate
    assert list(evaluate.rows(["expert"]))[-2:] == ["teacher", "expert"]
    assert list(evaluate.model_copy(update={"references": []}).rows(["expert"]))[-1] == "teacher"


def test_unknown_section(params: dict) -> None:
    params["curation"] = {}
    assert "params.yaml: unknown section 'curation' (did you mean 'curate'?); known sections:" in error(
        params
    )


def test_a_stage_gets_only_the_sections_it_declares(params: dict) -> None:
    params["sft"]["learning_rate"] = 3e-4
    sft = restrict(load_params(params=params), "sft")
    assert sft.sft.learning_rate == 3e-4 and sft.layout.sft == "data/sft"
    with pytest.raises(
        AttributeError, match=r"stage 'sft' reads params section 'grpo' but does not declare it"
    ):
        _ = sft.grpo.learning_rate
    assert set(READS) == {
        "build_model",
        "generate",
        "synthesize",
        "curate",
        "sft",
        "grpo",
        "evaluate",
        "register",
    }


def test_trl_configs_take_the_sections_trl_keys() -> None:
    from trl import GRPOConfig, SFTConfig

    from tasks.runtime.trainer_args import trainer_args

    params = load_params(REPO / "params.yaml", "smoke")
    sft = trainer_args(SFTConfig, params.sft, output_dir="x")
    assert (sft.num_train_epochs, sft.per_device_train_batch_size, sft.lr_scheduler_type) == (1, 8, "cosine")
    grpo = trainer_args(GRPOConfig, params.grpo, output_dir="x")
    expected = (params.grpo.num_generations, params.grpo.num_iterations, params.grpo.max_completion_length)
    assert (grpo.num_generations, grpo.num_iterations, grpo.max_completion_length) == expected
    assert (
        grpo.learning_rate == params.grpo.learning_rate and grpo.lr_scheduler_type == "constant_with_warmup"
    )


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


def test_a_profile_extends_another_merged_first(tmp_path: Path) -> None:
    path = _profile_dir(tmp_path, {"generate": {"num_train": 5, "seed": 3}})
    (tmp_path / "params.small.yaml").write_text(
        yaml.safe_dump({"extends": "try", "generate": {"num_train": 2}})
    )
    merged = read_params(path, "small")["generate"]
    assert (merged["num_train"], merged["seed"]) == (2, 3)  # its own value over the base profile's
    assert "extends" not in read_params(path, "small")
    llm_smoke = load_params(REPO / "params.yaml", "llm-smoke")
    assert llm_smoke.build_model.model == load_params(REPO / "params.yaml", "llm").build_model.model
    (tmp_path / "params.try.yaml").write_text(yaml.safe_dump({"extends": "small"}))
    with pytest.raises(ParamsError, match="extend each other in a loop"):
        read_params(path, "small")


def test_cli_writes_the_merged_profile(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "params.yaml"
    assert main(["--params", str(REPO / "params.yaml"), "--profile", "smoke", "--write", str(out)]) == 0
    assert read_params(out) == read_params(REPO / "params.yaml", "smoke")
    assert "# wander pipeline parameters" in out.read_text()  # params.yaml's comments kept
    assert "changed" in capsys.readouterr().out
    (tmp_path / "other").mkdir()
    bad = _profile_dir(tmp_path / "other", {"generate": {"seed": "s"}})
    assert main(["--params", str(bad), "--profile", "try"]) == 2
    assert re.search(r"params\.yaml: section 'generate': key 'seed' expects int", capsys.readouterr().err)


def test_a_stage_command_refuses_bad_params_before_doing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from tasks import generate
    from tasks.runtime.stage import stage_main

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


def test_the_done_line_shows_nested_headlines_flattened():
    metrics = {"steps": 3, "grpo-strong": {"random": {"win": 0.9}, "note": "x", "ok": True}, "curve": [1]}
    assert headline(metrics) == {"steps": 3, "grpo-strong.random.win": 0.9, "grpo-strong.note": "x"}


@pytest.mark.parametrize(
    "profile",
    sorted(p.name.removeprefix("params.").removesuffix(".yaml") for p in REPO.glob("params.*.yaml")),
)
def test_every_profile_loads_with_its_checks(profile: str) -> None:
    """A profile that extends another inherits its curriculum: one it does not fit fails here, not in a run."""
    load_params(REPO / "params.yaml", profile)
