"""Resumable evaluation: a killed `wander eval` rerun plays only what had not finished and writes what an
uninterrupted run writes; a changed input reuses nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wander import load_environment
from wander.core.episode import Episode
from wander.eval.config import EvaluateConfig
from wander.eval.evaluation import evaluate
from wander.eval.journal import JOURNAL, EvalJournal, Unit, decode, encode
from wander.eval.matrix import MatrixInterrupted
from wander.policies.scratch_model import build_scratch_model
from wander.policies.scratch_model_config import ScratchModelConfig

REPO = Path(__file__).resolve().parents[3]
TINY = ScratchModelConfig(
    vocab_size=300, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
    intermediate_size=64, max_position_embeddings=1024,
)  # fmt: skip
OUTPUTS = ("metrics.json", "matrix.json", "matrix.csv", "report.md", "episodes.jsonl.gz")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A tiny untrained local model that samples reverse_text replies."""
    return build_scratch_model(
        load_environment("reverse_text").corpus(), tmp_path_factory.mktemp("m") / "tiny", TINY
    )


def eval_command(model: Path, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "wander.cli", "eval", "--env", "reverse_text", "--policy", str(model),
        "--policy", "slips=expert-0.5", "--games", "20", "--samples", "6", "--temperature", "1",
        "--out", str(out), "--no-progress",
    ]  # fmt: skip


def run_env() -> dict[str, str]:
    # One thread: the same seeds sample the same tokens in every process.
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def test_a_killed_evaluation_resumes_where_it_stopped(tiny_model, tmp_path):
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    done = subprocess.run(
        eval_command(tiny_model, whole), cwd=REPO, env=run_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "resumed" not in done.stdout and not (whole / JOURNAL).exists()

    proc = subprocess.Popen(
        eval_command(tiny_model, cut),
        cwd=REPO,
        env=run_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    journal, deadline = cut / JOURNAL, time.monotonic() + 300
    try:
        # Two of the twelve row samples (the model's six, then the scripted row's) finished: kill it there.
        while not journal.exists() or journal.read_bytes().count(b"\n") < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "the evaluation ended before the kill"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL and not (cut / "report.md").exists()
    kept = journal.read_bytes().count(b"\n")
    assert 2 <= kept < 12

    again = subprocess.run(
        eval_command(tiny_model, cut), cwd=REPO, env=run_env(), capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr[-2000:]
    total = 2 * 6 * 6 * 20  # rows x samples x cells x items
    assert f"resumed {kept * 120} episodes from the journal, played {total - kept * 120}" in again.stdout
    assert f"{kept * 120} restored from the journal" in again.stderr
    for name in OUTPUTS:
        assert (cut / name).read_bytes() == (whole / name).read_bytes(), name
    assert not journal.exists()  # the report is written: nothing left to resume


def config(tmp_path: Path, **change) -> EvaluateConfig:
    settings = dict(
        policies={"slips": "expert-0.5"},
        references=[],
        baseline=None,
        games=3,
        samples=2,
        temperature=1.0,
        out_dir=str(tmp_path),
        progress=False,
    )
    return EvaluateConfig(**{**settings, **change})


def test_only_the_same_inputs_reuse_a_journal(tmp_path):
    broken = {"slips": "expert-0.5", "broken": "nowhere/at/all"}
    journaled = lambda: (tmp_path / JOURNAL).read_bytes().count(b"\n")  # noqa: E731

    def interrupted(change: dict, env: dict) -> None:
        # The first row finishes, the second fails: the journal is kept for a rerun.
        with pytest.raises(MatrixInterrupted):
            evaluate(config(tmp_path, **{"policies": broken, **change}), env={"name": "reverse_text", **env})

    interrupted({}, {})
    assert journaled() == 2  # the row's two samples
    changes = (
        ({"seed": 1}, {}),
        ({"temperature": 0.7}, {}),
        ({"max_batch_size": 2}, {}),
        ({"games": 2}, {}),
        ({}, {"num_groups": 2}),
        ({"policies": {**broken, "slips": "expert-0.4"}}, {}),
    )
    for i, (change, env) in enumerate(changes, 1):
        interrupted(change, env)
        assert journaled() == 2 + 2 * i, (change, env)  # nothing reused: both samples played and journaled
    interrupted({}, {})
    assert journaled() == 2 + 2 * len(changes)  # the same inputs: both samples restored, none played
    fresh = evaluate(config(tmp_path / "fresh"), env={"name": "reverse_text"})
    result = evaluate(config(tmp_path), env={"name": "reverse_text"})
    assert result.resumed == 2 * 6 * 3 and not (tmp_path / JOURNAL).exists()
    assert [ep.messages for ep in result.episodes["slips"]] == [ep.messages for ep in fresh.episodes["slips"]]
    for name in OUTPUTS:
        assert (tmp_path / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes(), name


def test_an_environment_object_is_journaled_only_with_its_settings(tmp_path):
    env = load_environment("reverse_text")
    with pytest.raises(MatrixInterrupted):
        evaluate(config(tmp_path, policies={"slips": "expert-0.5", "broken": "nowhere/at/all"}), env=env)
    assert not (tmp_path / JOURNAL).exists()  # its settings unknown: nothing to key a unit by
    with pytest.raises(MatrixInterrupted):
        evaluate(
            config(tmp_path, policies={"slips": "expert-0.5", "broken": "nowhere/at/all"}),
            env=env,
            env_config={"name": "reverse_text"},
        )
    result = evaluate(config(tmp_path), env={"name": "reverse_text"})  # the same settings, given either way
    assert result.resumed == 2 * 6 * 3


def test_the_journal_gives_back_what_it_was_given(tmp_path):
    state = {"board": "X........", "moves": (4, 0), "nested": {"path": [(1, 2)]}, "nan": float("nan"), "n": 3}
    assert decode(encode(state))["moves"] == (4, 0) and decode(encode(state))["nested"] == {"path": [(1, 2)]}
    journal = EvalJournal(tmp_path)
    episode = Episode(
        spec={"seed": 1}, messages=[{"role": "user", "content": "é"}], state=state, prompt_len=1
    )
    journal.save(
        "a", {"policy": "p", "sample": 0}, Unit([episode], 0.5, "scripted", {"exact": {"x": {"win": 1.0}}})
    )
    back = EvalJournal(tmp_path).restore("a")
    assert back.episodes[0].state["moves"] == (4, 0) and back.episodes[0].messages == episode.messages
    assert (back.seconds, back.decoding, back.extras) == (0.5, "scripted", {"exact": {"x": {"win": 1.0}}})
    odd = Episode(spec={"seed": 2}, messages=[], state={"cells": {1, 2}}, prompt_len=0)
    journal.save("b", {"policy": "p", "sample": 1}, Unit([odd], 0.1, "scripted", {}))
    assert EvalJournal(tmp_path).restore("b") is None  # a set would come back a list: played again instead
