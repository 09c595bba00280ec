"""The whole params checked against the selected environment before the first stage: one line per problem, naming
the key and the fix, and nothing run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.params import preflight
from tasks.params.load import PARAMS_FILE, load_params, read_params


def _params(**sections: dict) -> object:
    raw = read_params(PARAMS_FILE)
    for name, values in sections.items():
        raw[name] = {**raw[name], **values}
    return load_params(params=raw)


def test_the_default_params_are_ready_to_run():
    assert preflight.problems(_params()) == []


# Every CPU profile `make run PROFILE=...` takes (the GPU ones need CUDA for their vLLM server): llm-coding and
# llm-reasoning once inherited llm's tic-tac-toe line search, which their envs cannot run.
CPU_PROFILES = sorted(
    p.stem.removeprefix("params.")
    for p in Path(PARAMS_FILE).parent.glob("params.*.yaml")
    if "gpu" not in p.stem
)


@pytest.mark.parametrize("profile", CPU_PROFILES)
def test_every_cpu_profile_is_ready_to_run(profile: str):
    assert preflight.problems(load_params(PARAMS_FILE, profile=profile)) == []


def test_too_many_games_per_cell_for_an_envs_eval_split_is_found_up_front():
    # reverse_text's eval split holds 50 episodes a stratum: an explicit 200 cannot be played, null plays 50.
    found = preflight.problems(_params(env={"name": "reverse_text"}, evaluate={"games": 200}))
    assert len(found) == 1
    assert found[0].startswith(
        "evaluate.games / evaluate.opponents: reverse_text: the eval split has 50 episodes"
    )
    assert found[0].endswith("lower evaluate.games or grow the split (null = the env's 50)")
    assert preflight.problems(_params(env={"name": "reverse_text"}, evaluate={"games": 50})) == []


def test_a_rollout_option_the_env_cannot_score_and_an_unknown_column_are_named_together(
    tmp_path, monkeypatch
):
    # An env whose turns read a fresh observation gets decision rollouts, scored as grpo.play_on says; this one
    # (reverse_text's texts, one decision a turn) has no expected outcomes to score play_on: expected with.
    (tmp_path / "decisions_env.py").write_text(
        "from envs.reverse_text import load_environment as load_reverse_text\n"
        "def load_environment(**kwargs):\n"
        "    env = load_reverse_text(**kwargs)\n"
        "    env.full_history = False\n"
        "    return env\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    params = _params(env={"name": "decisions_env"}, evaluate={"games": 10, "opponents": ["stratum-9"]})
    found = preflight.problems(params)
    assert [p.split(":")[0] for p in found] == [
        "evaluate.games / evaluate.opponents",
        "grpo.play_on / grpo.explore / grpo.branch_at",
    ]
    assert "stratum-9" in found[0] and "ExpectedOutcomes" in found[1] and "play_on='sample'" in found[1]
    with pytest.raises(
        preflight.PreflightError, match="cannot run with env 'decisions_env'; nothing was run"
    ):
        preflight.preflight(params)
    assert (
        preflight.problems(
            _params(env={"name": "decisions_env"}, evaluate={"games": 10}, grpo={"play_on": "sample"})
        )
        == []
    )


@pytest.mark.parametrize(
    "name", ["reverse_text", "double_check", "calculator", "workplace_assistant", "coding"]
)
def test_a_decision_option_a_whole_conversation_env_would_ignore_is_refused_naming_the_key(name: str):
    # Issue 44: these envs' GRPO trains whole sampled episodes; play_on, explore and branch_at were dropped silently.
    # coding's held-out side holds 319 distinct problems, fewer than params.yaml's 200 eval + 200 test.
    sizes = {"generate": {"num_eval": 100, "num_test": 100}} if name == "coding" else {}
    assert preflight.problems(_params(env={"name": name}, **sizes)) == []  # the env's recipe: play_on sample
    (found,) = preflight.problems(_params(env={"name": name}, grpo={"play_on": "expected"}, **sizes))
    assert found.startswith(
        f"grpo.play_on / grpo.explore / grpo.branch_at: play_on='expected' would be ignored by {name}"
    )
    assert found.endswith("use play_on='sample'") and "\n" not in found
    (found,) = preflight.problems(
        _params(env={"name": name}, grpo={"explore": 0.25, "branch_at": "mistake"}, **sizes)
    )
    assert "explore=0.25, branch_at='mistake' would be ignored" in found
    assert found.endswith("use explore=0.0, branch_at='depth'")


def test_token_branching_is_found_up_front_for_an_env_of_several_turns_and_accepted_for_a_single_turn_one():
    (found,) = preflight.problems(_params(grpo={"branch_at": "token"}))  # tic-tac-toe: turns, not one reply
    assert found.startswith(
        "grpo.play_on / grpo.explore / grpo.branch_at: branch_at='token' trains one token"
    )
    assert "use branch_at='depth'" in found
    assert preflight.problems(_params(env={"name": "reverse_text"}, grpo={"branch_at": "token"})) == []


def test_the_command_exits_2_with_the_problems(tmp_path, capsys):
    import yaml

    raw = read_params(PARAMS_FILE)
    raw["env"]["name"], raw["evaluate"]["games"] = "reverse_text", 200
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    assert preflight.main(["--params", str(tmp_path / "params.yaml")]) == 2
    err = capsys.readouterr().err
    assert "evaluate.games" in err and "fewer than the 200 games per cell" in err
    assert preflight.main(["--params", str(PARAMS_FILE)]) == 0


def test_a_grpo_micro_batch_trls_config_would_refuse_is_found_before_sft():
    # Found by the chat profile on coding: per_device_train_batch_size 4 with groups of 8 stopped the grpo stage
    # at its start, after a 25-minute SFT (TRL: generation_batch_size must be divisible by num_generations).
    (found,) = preflight.problems(_params(grpo={"per_device_train_batch_size": 4, "batch_size": 32}))
    assert found == (
        "grpo.per_device_train_batch_size 4 x 1 processes is not a multiple of grpo.num_generations 8 (TRL's "
        "GRPOConfig refuses it): use a multiple of 8"
    )
    assert preflight.problems(_params(grpo={"per_device_train_batch_size": 8, "batch_size": 32})) == []


def test_until_unbeaten_needs_an_env_that_names_losing_lines_curve_points_and_one_process():
    # Tic-tac-toe can name the lines that beat a model (LosingLines); reverse_text cannot.
    assert preflight.problems(_params(grpo={"until_unbeaten": True})) == []
    found = preflight.problems(_params(env={"name": "reverse_text"}, grpo={"until_unbeaten": True}))
    assert found == [
        "grpo.until_unbeaten: reverse_text cannot name a line that beats the model (no LosingLines capability, "
        "wander/core/capabilities.py); set it false"
    ]
    found = preflight.problems(_params(grpo={"until_unbeaten": True, "curve_every": 0, "processes": 2}))
    assert [p.split(";")[0] for p in found if p.startswith("grpo.until_unbeaten")] == [
        "grpo.until_unbeaten: stages are checked at learning-curve points",
        "grpo.until_unbeaten: decided on one process",
    ]


def test_held_out_splits_an_env_cannot_fill_are_named_with_their_key():
    # The coding env's held-out side holds 319 distinct problems, eval and test apart: 200 + 200 cannot be drawn
    # (params.llm-coding.yaml once asked for that and failed in its generate stage).
    found = preflight.problems(_params(env={"name": "coding"}, generate={"num_eval": 200, "num_test": 200}))
    assert len(found) == 1
    assert found[0].startswith("generate.num_test: the test split found ")
    assert found[0].endswith(
        "distinct problems on its side of the held-out line in 20000 draws; lower its size or num_groups"
    )
