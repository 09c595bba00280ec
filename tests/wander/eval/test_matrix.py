"""The opponent matrix: values theory gives for scripted players, a frozen suite, one batched rollout per row."""

from __future__ import annotations

import json
import math

import pytest

from envs.tictactoe.players import RandomPlayer
from envs.tictactoe.suite import DEFAULT_OPPONENTS
from envs.tictactoe.tictactoe_config import SPLIT_SEED_RANGES
from wander import load_environment
from wander.cli.arguments import parse_policies
from wander.eval.cells import pooled
from wander.eval.config import EvaluateConfig
from wander.eval.matrix import MatrixInterrupted, run_matrix
from wander.policies.scratch_model import build_scratch_model
from wander.policies.scratch_model_config import ScratchModelConfig

SUITE = load_environment("tictactoe").evaluation_suite()
SIDES = SUITE.sides

TINY = ScratchModelConfig(
    vocab_size=300, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
    intermediate_size=64, max_position_embeddings=1024,
)  # fmt: skip
# Random vs random tic-tac-toe, exact over the game tree: X wins 58.5%, O wins 28.8%, draws 12.7%.
RANDOM_FIRST_WIN, RANDOM_SECOND_WIN, RANDOM_DRAW = 0.585, 0.288, 0.127


def inside(row: dict, metric: str, value: float) -> bool:
    return row[f"{metric}_ci_low"] <= value <= row[f"{metric}_ci_high"]


def overlap(a: dict, b: dict, metric_a: str, metric_b: str) -> bool:
    return (
        a[f"{metric_a}_ci_low"] <= b[f"{metric_b}_ci_high"]
        and b[f"{metric_b}_ci_low"] <= a[f"{metric_a}_ci_high"]
    )


@pytest.fixture(scope="module")
def scripted():
    """Minimax (p=0) and random against the default opponents, 400 games per cell (scripted players are fast)."""
    config = EvaluateConfig(
        baseline=None, policies={"minimax": "minimax", "random": "random"}, games=400, progress=False
    )
    return run_matrix(config)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A tiny untrained local model, built once for the module."""
    return build_scratch_model(
        load_environment("tictactoe").corpus(), tmp_path_factory.mktemp("m") / "tiny", TINY
    )


def test_rows_are_tidy(scripted):
    keys = [(r["policy"], r["opponent"], r["side"]) for r in scripted.rows]
    assert keys == [(p, o, s) for p in ("minimax", "random") for o in DEFAULT_OPPONENTS for s in SIDES]
    for r in scripted.rows:
        assert r["games"] == 400 and r["wins"] + r["draws"] + r["losses"] == 400
        assert r["decoding"] == "scripted"
        for metric in ("win", "draw", "loss", "non_loss", "invalid", "move_optimality", "format", "turns"):
            assert r[f"{metric}_ci_low"] <= r[metric] <= r[f"{metric}_ci_high"] + 1e-12


def test_minimax_never_loses(scripted):
    for opponent in DEFAULT_OPPONENTS:
        for side in SIDES:
            r = scripted.row("minimax", opponent, side)
            assert r["losses"] == 0 and r["non_loss"] == 1.0, (opponent, side)
            assert r["invalid"] == 0 and r["format"] == 1.0 and r["move_optimality"] == 1.0
    assert scripted.row("minimax", "minimax-0", "first")["draw"] == 1.0  # perfect play on both sides draws
    assert scripted.row("minimax", "minimax-0", "second")["draw"] == 1.0
    assert scripted.row("minimax", "random", "first")["win"] > 0.9


def test_random_vs_random_is_symmetric(scripted):
    first, second = scripted.row("random", "random", "first"), scripted.row("random", "random", "second")
    assert first["win_ci_low"] > second["win_ci_high"]  # moving first wins more
    assert overlap(first, second, "win", "loss") and overlap(first, second, "loss", "win")
    assert overlap(first, second, "draw", "draw")
    assert inside(first, "win", RANDOM_FIRST_WIN) and inside(second, "loss", RANDOM_FIRST_WIN)
    assert inside(first, "loss", RANDOM_SECOND_WIN) and inside(second, "win", RANDOM_SECOND_WIN)
    assert inside(first, "draw", RANDOM_DRAW) and inside(second, "draw", RANDOM_DRAW)


def test_stronger_opponents_concede_less(scripted):
    rates = [
        pooled([scripted.row("random", o, s) for s in SIDES], SUITE.metric("non_loss"))["mean"]
        for o in DEFAULT_OPPONENTS
    ]
    assert rates[0] > rates[-1] + 0.3  # random's non-loss falls from the random opponent to perfect minimax


def test_suite_is_frozen_and_per_cell():
    env = load_environment("tictactoe")
    specs = env.suite_specs(["random", "minimax-0.25"], 5, seed=3)
    assert specs == env.suite_specs(["random", "minimax-0.25"], 5, seed=3)
    assert [s["seed"] for s in specs] != [
        s["seed"] for s in env.suite_specs(["random", "minimax-0.25"], 5, seed=4)
    ]
    low, high = SPLIT_SEED_RANGES["test"]
    for i, spec in enumerate(specs):
        opponent, side = [(o, s) for o in ("random", "minimax-0.25") for s in SIDES][i // 5]
        assert (spec["opponent"], spec["side"]) == (opponent, side)
        assert spec["random_move_prob"] == (1.0 if opponent == "random" else 0.25)
        assert spec["model_starts"] == (side == "first")
        assert low <= spec["seed"] < high  # never a training seed
    # A cell's games do not depend on which other opponents are in the suite, and more games extend them.
    alone = env.suite_specs(["minimax-0.25"], 5, seed=3)
    assert [s["seed"] for s in alone] == [s["seed"] for s in specs[10:]]
    more = env.suite_specs(["minimax-0.25"], 12, seed=3)
    assert [s["seed"] for s in more[:5]] == [s["seed"] for s in alone[:5]]


def test_identical_reruns_are_identical():
    config = EvaluateConfig(
        baseline=None, policies={"r": "random", "m": "minimax-0.5"}, games=30, progress=False
    )
    a, b = run_matrix(config), run_matrix(config)
    assert a.rows == b.rows
    assert [ep.messages for ep in a.episodes["r"]] == [ep.messages for ep in b.episodes["r"]]


def test_every_game_of_a_row_goes_in_one_batch():
    calls = []

    class Recording(RandomPlayer):
        def __call__(self, conversations):
            calls.append(len(conversations))
            return super().__call__(conversations)

    config = EvaluateConfig(
        baseline=None, policies={"rec": "random"}, opponents=["random", "minimax-0"], games=7, progress=False
    )
    run_matrix(config, built={"rec": Recording(seed=0)})
    assert calls[0] == 2 * 2 * 7  # every cell's games in the first call
    assert calls == sorted(calls, reverse=True)  # then the live ones, turn by turn


def test_the_result_names_its_seed_and_a_baseline_it_has():
    class Broken(RandomPlayer):
        def __call__(self, conversations):
            raise RuntimeError("broken")

    config = EvaluateConfig(
        policies={"r": "random", "teacher": "teacher"}, references=[], opponents=["random"], games=2, seed=4,
        progress=False,
    )  # fmt: skip
    result = run_matrix(config)
    assert (result.seed, result.baseline) == (4, "teacher")
    assert run_matrix(config.model_copy(update={"baseline": None})).baseline == "r"  # null: the first row
    # A stopped matrix compares with a row that finished: the first, when the baseline row never played.
    with pytest.raises(MatrixInterrupted) as stopped:
        run_matrix(config, built={"teacher": Broken(seed=0)})
    assert list(stopped.value.partial.policies) == ["r"] and stopped.value.partial.baseline == "r"


def test_bad_config_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="unknown opponent 'minmax'"):  # the env knows its opponents
        run_matrix(EvaluateConfig(baseline=None, policies={"r": "random"}, opponents=["minmax"], games=1))
    with pytest.raises(ValueError, match="repeat"):
        EvaluateConfig(baseline=None, opponents=["random", "random"])
    with pytest.raises(ValueError, match="games"):
        EvaluateConfig(baseline=None, games=0)
    with pytest.raises(ValueError, match="temperature"):
        EvaluateConfig(baseline=None, temperature=-1)
    with pytest.raises(ValueError, match="NAME=SPEC"):
        parse_policies(["minimax", "minimax"])
    with pytest.raises(ValueError, match="not a scripted player"):
        run_matrix(
            EvaluateConfig(baseline=None, policies={"x": "no/such/model/here"}, games=1, progress=False)
        )


def test_policy_names():
    assert parse_policies(["minimax-0.5", "sft=data/ckpt/sft/", "/tmp/models/base", "http://h:8000/v1"]) == {
        "minimax-0.5": "minimax-0.5",
        "sft": "data/ckpt/sft/",
        "base": "/tmp/models/base",
        "http://h:8000/v1": "http://h:8000/v1",
    }


def test_local_model_goes_through_the_matrix(tiny_model):
    config = EvaluateConfig(
        baseline=None,
        policies={"tiny": str(tiny_model)}, references=[], opponents=["random", "minimax-0"], games=2, max_new_tokens=8,
        progress=False,
    )  # fmt: skip
    env = {"name": "tictactoe", "max_turns": 3, "rendering": "grid"}  # the params' env section, not defaults
    result = run_matrix(config, env=env)
    assert len(result.rows) == 4 and {r["decoding"] for r in result.rows} == {"greedy"}
    assert all(ep.state["turn"] <= 3 for ep in result.episodes["tiny"])
    assert "|" in result.episodes["tiny"][0].messages[1]["content"]  # the grid board
    for r in result.rows:
        assert r["games"] == 2 and 0.0 <= r["non_loss"] <= 1.0
        assert math.isnan(r["move_optimality"]) or 0.0 <= r["move_optimality"] <= 1.0
    assert json.dumps(run_matrix(config, env=env).rows) == json.dumps(
        result.rows
    )  # greedy: a rerun is identical (NaN too)

    sampled = run_matrix(config.model_copy(update={"temperature": 0.7}))
    assert {r["decoding"] for r in sampled.rows} == {"sampled (temperature 0.7)"}
