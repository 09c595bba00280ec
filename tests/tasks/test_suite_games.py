"""Games per cell that follow from the environment: a null `evaluate.games` (and `wander eval` without `--games`) is
the env's `suite_games()`, the most episodes every cell of its suite holds, at most `DEFAULT_SUITE_GAMES`; resolved
by `games_per_cell`, checked by the preflight, logged by the evaluate stage and printed in the run summary."""

from __future__ import annotations

import json

import pytest

from tasks import evaluate as evaluate_stage
from tasks.params import preflight
from tasks.params.load import PARAMS_FILE, load_params, read_params
from wander import load_environment
from wander.core.pipeline_hooks import DEFAULT_SUITE_GAMES, games_per_cell
from wander.eval.config import EvaluateConfig
from wander.eval.matrix import run_matrix


def _params(env: str, **evaluate):
    raw = read_params(PARAMS_FILE)
    raw["env"]["name"] = env
    raw["evaluate"] = {**raw["evaluate"], **evaluate}
    return load_params(params=raw)


def _small(num_eval: int, num_test: int, num_groups: int = 4):
    return load_environment(
        "reverse_text", num_train=4, num_eval=num_eval, num_test=num_test, num_groups=num_groups
    )


def test_reverse_text_with_the_default_params_passes_the_preflight_at_its_50_games() -> None:
    # The case a new user met: its eval and test splits hold 200 episodes over 4 strata, 50 a cell.
    params = _params("reverse_text")
    assert params.evaluate.games is None
    assert preflight.problems(params) == []
    env = load_environment(**params.env.kwargs(), **params.generate.env_settings())
    assert env.suite_games() == games_per_cell(env, None) == 50
    assert preflight.budget_line(params, env).endswith("; games per cell: evaluate.games 50")


def test_tictactoe_draws_fresh_games_per_cell_so_it_stays_at_the_cap() -> None:
    env = load_environment("tictactoe")
    assert DEFAULT_SUITE_GAMES == 200
    assert env.suite_games() == games_per_cell(env, None) == DEFAULT_SUITE_GAMES
    assert len(env.suite_specs(["random"], env.suite_games(), 0)) == 2 * DEFAULT_SUITE_GAMES


def test_the_env_answers_the_fewest_episodes_of_any_cell_up_to_the_cap() -> None:
    assert _small(12, 20).suite_games() == 3  # eval: 3 a stratum, test: 5
    assert _small(10, 40).suite_games() == 2  # round-robin strata: 3, 3, 2, 2
    assert _small(1000, 2000).suite_games() == DEFAULT_SUITE_GAMES  # 250 a cell, capped
    env = _small(10, 40)
    specs = env.suite_specs(list(env.evaluation_suite().groups), env.suite_games(), 0)
    assert len(specs) == 4 * 2 * 2  # every cell can play that many
    with pytest.raises(ValueError, match="fewer than the 3 games per cell"):
        env.suite_specs(list(env.evaluation_suite().groups), env.suite_games() + 1, 0)


def test_an_explicit_number_wins_and_a_split_that_leaves_a_cell_empty_is_refused() -> None:
    env = _small(12, 20)
    assert (
        games_per_cell(env, 7) == 7
    )  # suite_specs refuses it, naming the key (tests/tasks/test_preflight.py)
    empty = _small(3, 20)  # 3 eval episodes over 4 strata
    assert empty.suite_games() == 0
    with pytest.raises(ValueError, match=r"no eval or test episode; grow the split \(generate.num_eval"):
        games_per_cell(empty, None)


def test_the_preflight_names_a_too_large_number_and_the_envs_own() -> None:
    found = preflight.problems(_params("reverse_text", games=60))
    assert found == [
        "evaluate.games / evaluate.opponents: reverse_text: the eval split has 50 episodes in stratum-0, fewer "
        "than the 60 games per cell asked; lower evaluate.games or grow the split (null = the env's 50)"
    ]
    params = _params("tictactoe", games=300)  # tic-tac-toe has fresh seeds for more than the cap
    assert preflight.problems(params) == []
    env = load_environment(**params.env.kwargs())
    assert preflight.budget_line(params, env).endswith("; games per cell: evaluate.games 300 (set)")


def test_the_matrix_plays_the_envs_games_per_cell_when_given_none() -> None:
    env = _small(10, 40)
    config = EvaluateConfig(policies={"expert": "expert"}, references=[], baseline=None, progress=False)
    assert config.games is None
    result = run_matrix(config, env=env)
    assert result.games == 2
    assert len(result.rows) == 4 * 2 and all(r["games"] == 2 for r in result.rows)


def test_the_evaluate_stage_logs_the_resolved_number_and_plays_it(monkeypatch) -> None:
    logged, played = {}, {}
    monkeypatch.setattr(evaluate_stage.tracking, "log_params", logged.update)

    def fake_evaluate(config, built, local, play_in, env_config=None):
        played["games"] = config.games
        return "result"

    monkeypatch.setattr(evaluate_stage, "evaluate", fake_evaluate)
    monkeypatch.setattr(evaluate_stage, "log_to_mlflow", lambda result, config: True)
    monkeypatch.setattr(evaluate_stage, "headline_metrics", lambda result: {})
    evaluate_stage.run(_params("reverse_text"))
    assert logged["resolved/evaluate/games"] == played["games"] == 50
    evaluate_stage.run(_params("reverse_text", games=20))
    assert logged["resolved/evaluate/games"] == played["games"] == 20


def test_wander_eval_without_games_plays_the_envs(tmp_path, capsys) -> None:
    from wander.cli import build_parser, main

    assert build_parser().parse_args(["eval", "--env", "reverse_text"]).games is None
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    assert (
        f"(default: the env's, the most episodes every cell holds, at most {DEFAULT_SUITE_GAMES})"
        in " ".join(capsys.readouterr().out.split())
    )
    out = tmp_path / "eval"
    settings = ["--set", "num_train=4", "--set", "num_eval=9", "--set", "num_test=9"]
    assert (
        main(
            [
                "eval",
                "--env",
                "reverse_text",
                *settings,
                "--policy",
                "expert",
                "--no-progress",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert json.loads((out / "matrix.json").read_text())["games_per_cell"] == 3  # 9 over 3 strata
