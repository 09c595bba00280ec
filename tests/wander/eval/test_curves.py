"""Learning curves: points from a trainer's log history, read from model folders, drawn end to end."""

import json

import matplotlib.image

from wander import load_environment
from wander.eval.curves import CURVE_FILE, curve_points, plot_curves, rate_series, read_curves
from wander.policies.loading import make_policy


def test_curve_points_keep_only_curve_entries_without_the_prefix():
    history = [
        {"step": 0, "curve/random/win": 0.4, "curve/minimax-0/loss": 1.0},
        {"step": 10, "reward": 0.3},
        {"step": 20, "curve/random/win": 0.5, "curve/minimax-0/loss": 0.9},
    ]
    assert curve_points(history) == [
        {"step": 0, "random/win": 0.4, "minimax-0/loss": 1.0},
        {"step": 20, "random/win": 0.5, "minimax-0/loss": 0.9},
    ]


def test_curves_are_read_in_row_order_and_drawn(tmp_path):
    for name, win in (("grpo-a", 0.4), ("grpo-b", 0.6)):
        (tmp_path / name).mkdir()
        points = [{"step": 0, "random/win": win}, {"step": 10, "random/win": win + 0.1}]
        (tmp_path / name / CURVE_FILE).write_text(json.dumps(points))
    (tmp_path / "sft").mkdir()  # a model folder without a curve is skipped
    dirs = {
        "sft": str(tmp_path / "sft"),
        "grpo-b": str(tmp_path / "grpo-b"),
        "grpo-a": str(tmp_path / "grpo-a"),
    }
    curves = read_curves(dirs)
    assert [name for name, _ in curves] == ["grpo-b", "grpo-a"]
    png = plot_curves(curves, tmp_path / "curve.png")
    assert matplotlib.image.imread(png).shape[1] > 600
    empty = plot_curves([], tmp_path / "empty.png")  # the DVC output exists even without curves
    assert empty.is_file()


def test_every_series_an_env_names_is_a_key_of_its_learning_curve():
    env = load_environment("tictactoe")
    series = env.evaluation_suite().curve_series
    keys = set(env.curve_metrics(make_policy("minimax-0", env=env)))
    assert series and {key for key, _ in series} <= keys
    assert load_environment("reverse_text").evaluation_suite().curve_series == ()  # every key is plotted


def test_an_env_without_named_series_plots_its_rates_not_the_points_seconds():
    curves = [("grpo-main", [{"step": 0, "exact": 0.17, "lcs_ratio": 0.88, "seconds": 0.67}])]
    assert rate_series(curves) == (("exact", "exact"), ("lcs_ratio", "lcs_ratio"))
