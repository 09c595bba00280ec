"""Outputs of the matrix (JSON, CSV, plots, Markdown) and the interval-based comparison."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import errno
import json
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import matplotlib.image
import pytest
from matplotlib.figure import Figure

from envs.tictactoe.board import legal_moves
from envs.tictactoe.players import RandomPlayer
from tasks.evaluate import mlflow_key, run
from tasks.params.evaluation_sections import Evaluate as EvaluateConfig
from tasks.params.sections import Params
from wander import load_environment
from wander.core import atomic_io
from wander.core.atomic_io import TEMP_NAME
from wander.core.policy import Reply
from wander.eval.compare import BETTER, UNCLEAR, WORSE, compare, conclusion, is_better, verdict
from wander.eval.evaluation import write_report
from wander.eval.matrix import run_matrix
from wander.eval.matrix_report import markdown_report, sample_games, text_table
from wander.eval.outputs import OUTPUTS

SUITE = load_environment("tictactoe").evaluation_suite()
NON_LOSS = SUITE.metric("non_loss")

OPPONENTS = ["random", "minimax-0.5", "minimax-0"]


class Clumsy(RandomPlayer):
    """Opens every game with an off-board move, then plays at random: every game has an invalid move."""

    def __call__(self, conversations):
        return [
            Reply("<move>9</move>") if sum(m["role"] == "assistant" for m in c) == 0 else r
            for c, r in zip(conversations, super().__call__(conversations), strict=True)
        ]


class FirstFree(RandomPlayer):
    """Plays the first free cell: deterministic, so the matrix also computes its exact results."""

    greedy = True

    def choose(self, board: str) -> int:
        return legal_moves(board)[0]


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return EvaluateConfig(
        baseline=None,
        policies={"random": "random", "clumsy": "random", "minimax": "minimax"},
        opponents=OPPONENTS,
        games=40,
        out_dir=str(tmp_path_factory.mktemp("eval")),
        progress=False,
    )


@pytest.fixture(scope="module")
def result(config):
    # Clumsy counts its own turns, so it needs the whole game in each conversation.
    return run_matrix(config, built={"clumsy": Clumsy(seed=1)}, env={"name": "tictactoe", "history": "full"})


@pytest.fixture(scope="module")
def paths(result, config):
    return write_report(result, config.out_dir)


def rows_of(result, name):
    return [r for r in result.rows if r["policy"] == name]


# Files opened for writing and renames, while a `file_events` block runs: ("write", path) or ("rename", src, dst).
_RECORDING: list[list[tuple[str, ...]]] = []


def _audit(event: str, args: tuple) -> None:
    # Python's audit events see every file opened or renamed, whoever does it (our writers, matplotlib, Pillow).
    if not _RECORDING:
        return
    if event == "open" and not isinstance(args[0], int):
        mode, flags = args[1], args[2]
        writes = any(c in mode for c in "wax+") if mode else flags & (os.O_WRONLY | os.O_RDWR)
        if writes:
            _RECORDING[-1].append(("write", os.path.abspath(os.fsdecode(args[0]))))
    elif event == "os.rename":  # os.rename and os.replace both
        _RECORDING[-1].append(
            ("rename", os.path.abspath(os.fsdecode(args[0])), os.path.abspath(os.fsdecode(args[1])))
        )


sys.addaudithook(_audit)


@contextlib.contextmanager
def file_events() -> Iterator[list[tuple[str, ...]]]:
    """Record the files opened for writing and the renames done in the block."""
    events: list[tuple[str, ...]] = []
    _RECORDING.append(events)
    try:
        yield events
    finally:
        _RECORDING.remove(events)


def check_renamed_into_place(out: Path, events: list[tuple[str, ...]], names: Iterable[str]) -> None:
    """Each of `names` in `out` was written under the atomic writer's temporary name, then renamed over the output
    in one step (readers never see a partial file), and nothing else is left in `out`."""
    out, names = os.path.abspath(out), set(names)
    written = [e[1] for e in events if e[0] == "write" and os.path.dirname(e[1]) == out]
    in_place = sorted(os.path.basename(p) for p in written if os.path.basename(p) in names)
    assert not in_place, f"written in place, visible half-written: {in_place}"
    assert written and all(TEMP_NAME.fullmatch(os.path.basename(p)) for p in written), written
    renamed = {e[2]: e[1] for e in events if e[0] == "rename" and os.path.dirname(e[2]) == out}
    assert set(renamed) == {os.path.join(out, name) for name in names}
    for dst, src in renamed.items():
        temp = TEMP_NAME.fullmatch(os.path.basename(src))
        assert temp and temp["target"] == os.path.basename(dst) and temp["kind"] == "tmp", (src, dst)
        assert os.path.dirname(src) == out and src in written  # one filesystem: the rename is atomic
    assert set(os.listdir(out)) == names  # no temporary file left


def test_every_output_is_written_under_a_temporary_name_then_renamed_into_place(result, tmp_path):
    with file_events() as events:
        paths = write_report(result, tmp_path)
    assert set(paths) == set(OUTPUTS)
    assert all(path.stat().st_size > 0 for path in paths.values())
    check_renamed_into_place(tmp_path, events, OUTPUTS.values())


def test_the_atomicity_check_catches_a_writer_that_writes_in_place(result, tmp_path, monkeypatch):
    monkeypatch.setattr(atomic_io, "_tmp_name", lambda path, kind: path)  # a broken writer: no temporary name
    with file_events() as events:
        write_report(result, tmp_path)
    with pytest.raises(AssertionError, match="written in place"):
        check_renamed_into_place(tmp_path, events, OUTPUTS.values())


def test_an_interrupted_report_leaves_every_file_whole_and_no_temporary_file(result, tmp_path, monkeypatch):
    before = {kind: path.read_bytes() for kind, path in write_report(result, tmp_path).items()}
    savefig = Figure.savefig

    def disk_full_at_the_bars(self, fname, *args, **kwargs):
        if OUTPUTS["bars"] in os.path.basename(fname):  # half a PNG reaches the disk, then it is full
            Path(fname).write_bytes(before["bars"][: len(before["bars"]) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return savefig(self, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", disk_full_at_the_bars)
    # Another seed, which matrix.json and report.md record: a rewrite of either shows.
    with pytest.raises(OSError, match="No space left"):
        write_report(dataclasses.replace(result, seed=1), tmp_path)
    paths = {kind: tmp_path / name for kind, name in OUTPUTS.items()}
    # Written before the failure: the new versions, whole.
    assert json.loads(paths["matrix"].read_text())["seed"] == 1
    assert json.loads(paths["metrics"].read_bytes()) == json.loads(before["metrics"])
    assert paths["csv"].read_bytes() == before["csv"] and matplotlib.image.imread(paths["heatmap"]).size
    # The failed plot and those after it: the previous versions, untouched; nothing else in the folder.
    assert [paths[k].read_bytes() == before[k] for k in ("bars", "curve", "report")] == [True] * 3
    assert set(os.listdir(tmp_path)) == set(OUTPUTS.values()), os.listdir(tmp_path)


def test_matrix_json_is_nested_numbers(paths, result):
    metrics = json.loads(paths["matrix"].read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert metrics["games_per_cell"] == 40
    for name in result.policies:
        assert metrics["policies"][name]["overall"]["games"] == 40 * len(OPPONENTS) * 2
        for opponent in OPPONENTS:
            cells = metrics["policies"][name]["opponents"][opponent]
            assert set(cells) == {"first", "second", "both"}
            for side in result.sides:
                assert cells[side]["non_loss"] == result.row(name, opponent, side)["non_loss"]
                assert all(isinstance(v, (int, float)) for v in cells[side].values())


def leaves(tree: dict) -> list:
    return [x for v in tree.values() for x in (leaves(v) if isinstance(v, dict) else [v])]


def test_metrics_json_holds_only_the_candidate_and_baseline_headline(tmp_path):
    config = EvaluateConfig(
        policies={
            "old": "data/models/sft",
            "new": "data/models/grpo",
            "teacher": "expert-0.5",
            "rnd": "random",
        },
        opponents=OPPONENTS,
        games=12,
        out_dir=str(tmp_path),
        progress=False,
        baseline="teacher",
    )

    def built():  # stand-ins for the model folders, fresh for each run
        return {"old": Clumsy(seed=2), "new": FirstFree()}

    result = run_matrix(config, built=built())
    paths = write_report(result, tmp_path)
    metrics = json.loads(paths["metrics"].read_text())
    # The last model row is the candidate; scripted rows and earlier checkpoints stay in the matrix only.
    assert list(metrics) == ["new", "teacher"]
    weakest, strongest = OPPONENTS[0], OPPONENTS[-1]
    for name in metrics:
        rows = rows_of(result, name)

        def rate(cells, field):
            return round(sum(r[field] for r in cells) / sum(r["games"] for r in cells), 4)

        weak = [r for r in rows if r["opponent"] == weakest]
        strong = [r for r in rows if r["opponent"] == strongest]
        assert metrics[name]["all"] == {
            "non_loss": round(1 - sum(r["losses"] for r in rows) / sum(r["games"] for r in rows), 4),
            "invalid": rate(rows, "invalid_games"),
        }
        assert metrics[name][weakest] == {"win": rate(weak, "wins"), "loss": rate(weak, "losses")}
        assert metrics[name][strongest] == {"loss": rate(strong, "losses")}
    # Greedy model rows also get their exact results; the scripted baseline has none. A dozen columns in all.
    exact = result.exact["new"]
    assert metrics["new"]["exact"] == {
        weakest: {"win": round(exact[weakest]["win"], 4), "loss": round(exact[weakest]["loss"], 4)},
        strongest: {"loss": round(exact[strongest]["loss"], 4)},
    }
    assert "exact" not in metrics["teacher"]
    assert len(leaves(metrics)) == 5 + 3 + 5
    assert run(Params(evaluate=config), built()) == metrics  # the stage returns what it wrote
    assert "old" in json.loads(paths["matrix"].read_text())["policies"]
    # ... and the worst case: an opponent that knows "play the first free cell" beats it on both sides, by a line
    # of real moves the report prints.
    worst = json.loads(paths["matrix"].read_text())["worst_case"]
    assert set(worst) == {"new"} and {w["outcome"] for w in worst["new"].values()} == {"loss"}
    line = ", ".join(worst["new"]["X"]["line"])
    sound = worst["new"]["X"]["sound"]  # a strong player beats it too: its first free cell gives up the value
    row = f"| new | X | loss | {line} | {sound['outcome']} | {', '.join(sound['line'])} |"
    assert line.startswith("X 0, O ") and sound["outcome"] == "loss" and row in paths["report"].read_text()


def test_csv_has_one_row_per_policy_opponent_side(paths, result):
    with paths["csv"].open() as f:
        rows = list(csv.DictReader(f))
    keys = [(r["policy"], r["opponent"], r["side"]) for r in rows]
    assert len(keys) == len(set(keys)) == len(result.policies) * len(OPPONENTS) * 2
    assert {"win_ci_low", "non_loss_ci_high", "invalid", "format", "move_optimality", "turns"} <= set(rows[0])


def test_plots_are_images(paths):
    for kind in ("heatmap", "bars"):
        image = matplotlib.image.imread(paths[kind])
        assert image.shape[0] > 300 and image.shape[1] > 600


def test_report_contains_every_cell(paths, result):
    text = paths["report"].read_text()
    for r in result.rows:
        cell = f"| {r['opponent']} | {r['side']} | {r['win']:.2f} [{r['win_ci_low']:.2f}, {r['win_ci_high']:.2f}]"
        assert cell in text, cell
        assert f"{r['non_loss']:.2f} [{r['non_loss_ci_low']:.2f}, {r['non_loss_ci_high']:.2f}]" in text
    assert "![non-loss heatmap](headline_heatmap.png)" in text and "decoding: greedy" in text
    assert "## Compared with `random`" in text and "minimax is better than random" in text


def test_report_shows_sample_games(paths, result):
    text = paths["report"].read_text()
    assert "### minimax: a win vs" in text
    assert "### random: a loss vs" in text
    assert "### clumsy: an invalid move vs" in text
    kinds = [kind for kind, _ in sample_games(result.episodes["clumsy"], SUITE.report.samples)]
    assert kinds == ["a win", "a loss", "an invalid move"]
    game = result.render(result.episodes["clumsy"][0])
    assert "turn 1" in game and "end" in game and '"<move>9</move>"' in game


def test_text_table_lists_every_cell(result):
    table = text_table(result)
    assert "40 games per cell; decoding: greedy" in table
    assert len(table.splitlines()) == 2 + len(result.rows)


def test_compare_uses_intervals(result):
    found = compare(rows_of(result, "random"), rows_of(result, "minimax"), NON_LOSS)
    by_column = {(c["opponent"], c["side"]): c["verdict"] for c in found}
    assert by_column["random", "first"] == by_column["random", "second"] == BETTER
    assert by_column["all", "both"] == BETTER and is_better(found)
    assert conclusion(found, "random", "minimax").startswith("minimax is better than random")
    backwards = compare(rows_of(result, "minimax"), rows_of(result, "random"), NON_LOSS)
    assert backwards[0]["verdict"] == WORSE and not is_better(backwards)
    same = compare(rows_of(result, "random"), rows_of(result, "random"), NON_LOSS)
    assert {c["verdict"] for c in same} == {UNCLEAR} and not is_better(same)
    assert "no clear difference" in conclusion(same)


def test_verdict_and_bad_input():
    a = {"ci_low": 0.2, "ci_high": 0.4}
    assert verdict(a, {"ci_low": 0.45, "ci_high": 0.6}) == BETTER
    assert verdict(a, {"ci_low": 0.35, "ci_high": 0.6}) == UNCLEAR  # overlap: raw means do not decide
    assert verdict(a, {"ci_low": 0.0, "ci_high": 0.1}) == WORSE
    assert (
        verdict(a, {"ci_low": 0.0, "ci_high": 0.1}, lower_is_better=True) == BETTER
    )  # fewer losses is better
    with pytest.raises(
        ValueError, match="choose one of win, draw, loss, non_loss, invalid, move_optimality$"
    ):
        SUITE.comparable("turns")  # a mean pooled without an interval
    with pytest.raises(ValueError, match="no metric 'wins'"):
        SUITE.comparable("wins")
    with pytest.raises(ValueError, match="no losses"):
        compare(
            [{"opponent": "random", "side": "first"}], [{"opponent": "random", "side": "first"}], NON_LOSS
        )
    cell = {"losses": 0, "games": 1}
    with pytest.raises(ValueError, match="same opponents"):
        compare(
            [{"opponent": "random", "side": "first", **cell}],
            [{"opponent": "minimax-0", "side": "first", **cell}],
            NON_LOSS,
        )


def test_sampled_decoding_is_reported(result):
    sampled = dataclasses.replace(result, decoding="sampled (temperature 0.8)")
    assert "decoding: sampled (temperature 0.8)" in markdown_report(sampled)


def test_run_returns_the_metrics_it_writes(tmp_path):
    config = EvaluateConfig(
        baseline=None,
        policies={"m": "minimax"},
        opponents=["random"],
        games=5,
        out_dir=str(tmp_path),
        progress=False,
    )
    metrics = run(Params(evaluate=config))
    assert metrics == json.loads((tmp_path / OUTPUTS["metrics"]).read_text())
    assert metrics["m"]["all"]["non_loss"] == 1.0 and metrics["m"]["random"]["loss"] == 0.0
    matrix = json.loads((tmp_path / OUTPUTS["matrix"]).read_text())
    assert matrix["policies"]["m"]["opponents"]["random"]["both"]["non_loss"] == 1.0


def test_mlflow_logging_when_a_run_is_active(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.chdir(tmp_path)
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    config = EvaluateConfig(
        baseline=None, policies={"m": "minimax"}, opponents=["random"], games=5, out_dir="out", progress=False
    )
    try:
        with mlflow.start_run() as active:
            run(Params(evaluate=config))
    finally:
        mlflow.set_tracking_uri(previous)
    logged = mlflow.get_run(active.info.run_id)
    assert logged.data.metrics[mlflow_key("eval", "m", "random", "first", "non_loss")] == 1.0
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(active.info.run_id, "evaluate")}
    assert "evaluate/report.md" in artifacts and "evaluate/headline_heatmap.png" in artifacts
