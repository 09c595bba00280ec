"""`wander rescore`: a stored evaluation scored again by the env's current rubric, without generating. Unchanged, it
rebuilds the evaluation's matrix byte for byte; after a rubric change it names the episodes whose reward moved."""

from __future__ import annotations

import gzip
import json

import pytest

from wander import load_environment
from wander.cli import main
from wander.core.rubric import Rubric
from wander.eval.config import EvaluateConfig
from wander.eval.evaluation import evaluate, write_report
from wander.eval.rescore import rescore

REVERSE = {"name": "reverse_text", "num_train": 8, "num_eval": 16, "num_test": 16}


@pytest.fixture(scope="module")
def tictactoe_eval(tmp_path_factory):
    out = tmp_path_factory.mktemp("ttt")
    config = EvaluateConfig(policies={"slips": "expert-0.5"}, baseline=None, games=6, out_dir=str(out))
    evaluate(config, env={"name": "tictactoe"})
    return out


@pytest.fixture(scope="module")
def reverse_eval(tmp_path_factory):
    out = tmp_path_factory.mktemp("reverse")
    config = EvaluateConfig(policies={"slips": "expert-0.5"}, baseline=None, games=4, out_dir=str(out))
    evaluate(config, env=REVERSE)
    return out


@pytest.mark.parametrize("stored", ["tictactoe_eval", "reverse_eval"])
def test_an_unchanged_rubric_rebuilds_the_matrix_byte_for_byte(stored, request, tmp_path, capsys):
    source = request.getfixturevalue(stored)
    env = "tictactoe" if stored == "tictactoe_eval" else "reverse_text"
    settings = [] if env == "tictactoe" else [f"--set={k}={v}" for k, v in REVERSE.items() if k != "name"]
    assert main(["rescore", str(source), "--env", env, *settings, "--out", str(tmp_path / "new")]) == 0
    printed = capsys.readouterr().out
    assert "0 changed score, 0 diverged" in printed
    for name in ("matrix.json", "matrix.csv", "metrics.json"):
        assert (tmp_path / "new" / name).read_bytes() == (source / name).read_bytes(), name
    old, new = (gzip.open(p / "episodes.jsonl.gz").read() for p in (source, tmp_path / "new"))
    assert [json.loads(line)["values"] for line in old.splitlines()] == [
        json.loads(line)["values"] for line in new.splitlines()
    ]


def test_a_rubric_change_names_the_episodes_whose_reward_moved(reverse_eval, tmp_path):
    env = load_environment(**REVERSE)
    records = [json.loads(line) for line in gzip.open(reverse_eval / "episodes.jsonl.gz")]
    # The new rubric rewards an exact reversal only (before: the longest common subsequence's share).
    strict = Rubric(parser=env.rubric.parser)
    for func, name in zip(env.rubric.funcs, env.rubric.names, strict=True):
        strict.add(func, 1.0 if name == "exact" else 0.0, name=name)
    env.rubric = strict
    done = rescore(reverse_eval, env)
    moved = [i for i, r in enumerate(records) if r["values"]["exact"] != r["reward"]]
    assert 0 < len(moved) < len(records)  # the slipping player reverses some texts exactly, not all
    assert [c["index"] for c in done.changed] == moved and done.diverged == []
    assert all(c["now"] == records[c["index"]]["values"]["exact"] for c in done.changed)
    rescored = [ep.reward for eps in done.result.episodes.values() for ep in eps]  # in the file's order
    assert rescored == [r["values"]["exact"] for r in records]


def test_a_folder_without_an_evaluation_is_refused_naming_it(tmp_path):
    with pytest.raises(ValueError, match="is not an evaluation: .*episodes.jsonl.gz is missing"):
        rescore(tmp_path, load_environment("tictactoe"))


def test_what_the_machine_measured_is_kept_as_recorded(tmp_path):
    # coding's exec_seconds differ on every run of the same code: the rescored matrix keeps the recorded ones.
    coding = {"name": "coding", "num_train": 8, "num_eval": 8, "num_test": 8, "heldout": "test"}
    config = EvaluateConfig(policies={"slips": "expert-0.5"}, references=[], baseline=None, games=1)
    evaluate(config.model_copy(update={"out_dir": str(tmp_path / "old")}), env=coding)
    done = rescore(tmp_path / "old", load_environment(**coding))
    assert done.changed == [] == done.diverged
    write_report(done.result, tmp_path / "new")
    assert (tmp_path / "new" / "matrix.json").read_bytes() == (tmp_path / "old" / "matrix.json").read_bytes()
