"""`wander eval` and `wander compare`: tables on stdout, reports on disk, clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wander import load_environment
from wander.cli import main
from wander.policies.scratch_model import build_scratch_model
from wander.policies.scratch_model_config import ScratchModelConfig

REPO = Path(__file__).resolve().parents[2]
TINY = ScratchModelConfig(
    vocab_size=300, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
    intermediate_size=64, max_position_embeddings=1024,
)  # fmt: skip


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A tiny untrained local model, built once for the module."""
    return build_scratch_model(
        load_environment("tictactoe").corpus(), tmp_path_factory.mktemp("m") / "tiny", TINY
    )


def test_eval_prints_the_table_and_writes_the_report(tmp_path, capsys):
    out = tmp_path / "report"
    argv = ["eval", "--policy", "minimax", "--policy", "rnd=random", "--opponents", "random,minimax-0"]
    assert main([*argv, "--games", "10", "--out", str(out), "--no-progress"]) == 0
    stdout = capsys.readouterr().out
    assert "10 games per cell" in stdout and "non-loss [95% CI]" in stdout
    assert stdout.count("minimax ") >= 4 and stdout.count("rnd ") == 4  # one line per opponent x side
    assert {p.name for p in out.iterdir()} == {
        "metrics.json", "matrix.json", "matrix.csv", "headline_heatmap.png", "headline_by_policy.png", "report.md",
        "learning_curve.png", "episodes.jsonl.gz",
    }  # fmt: skip
    matrix = json.loads((out / "matrix.json").read_text())
    assert matrix["policies"]["minimax"]["overall"]["loss"] == 0.0
    assert json.loads((out / "metrics.json").read_text())["minimax"]["minimax-0"]["loss"] == 0.0


def test_eval_refuses_bad_input_with_the_fix(tmp_path, capsys):
    assert main(["eval", "--policy", "minimax", "--opponents", "minmax-0.5", "--out", str(tmp_path)]) == 2
    assert "unknown opponent 'minmax-0.5'" in capsys.readouterr().err
    assert main(["eval", "--policy", "random", "--policy", "random", "--out", str(tmp_path)]) == 2
    assert "NAME=SPEC" in capsys.readouterr().err
    assert main(["eval", "--policy", "nowhere/at/all", "--games", "1", "--out", str(tmp_path)]) == 2
    assert "not a scripted player" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written on bad input


def test_eval_samples_print_pass_at_k(tmp_path, capsys):
    """`wander eval --samples 8`: each item played 8 times, pass@1, pass@8 and avg@8 per cell with intervals."""
    argv = [
        "eval",
        "--env",
        "reverse_text",
        "--policy",
        "slips=expert-0.5",
        "--samples",
        "8",
        "--temperature",
        "1",
    ]
    assert main([*argv, "--games", "4", "--out", str(tmp_path), "--no-progress"]) == 0
    stdout = capsys.readouterr().out
    assert "4 items x 8 samples (32 episodes) per cell" in stdout
    assert "pass@1 [95% CI]" in stdout and "pass@8 [95% CI]" in stdout and "avg@8 [95% CI]" in stdout
    assert stdout.count("slips ") == 6  # one line per stratum x split
    assert "| slips | 24 |" in (tmp_path / "report.md").read_text()  # the pass@k summary over its 24 items


def test_eval_samples_need_sampling(tmp_path, capsys):
    argv = ["eval", "--env", "reverse_text", "--policy", "expert", "--samples", "8", "--out", str(tmp_path)]
    assert main(argv) == 2
    assert "set temperature above 0" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # refused before any work


def test_compare_says_minimax_beats_random(capsys):
    argv = [
        "compare",
        "random",
        "minimax",
        "--opponents",
        "random,minimax-0.5",
        "--games",
        "60",
        "--no-progress",
    ]
    assert main(argv) == 0
    stdout = capsys.readouterr().out
    assert "random first" in stdout and "all (pooled)" in stdout
    assert stdout.count("better") >= 5
    assert "minimax is better than random on non_loss" in stdout


def test_compare_same_policy_shows_no_clear_difference(capsys):
    argv = [
        "compare",
        "a=minimax-0.5",
        "b=minimax-0.5",
        "--opponents",
        "random",
        "--games",
        "30",
        "--no-progress",
    ]
    assert main(argv) == 0
    assert "no clear difference between a and b" in capsys.readouterr().out


def test_local_model_through_the_cli(tiny_model, tmp_path, capsys):
    argv = [
        "eval",
        "--policy",
        str(tiny_model),
        "--opponents",
        "random",
        "--games",
        "2",
        "--max-new-tokens",
        "8",
    ]
    assert main([*argv, "--out", str(tmp_path / "greedy"), "--no-progress"]) == 0
    stdout = capsys.readouterr().out
    assert "decoding: greedy" in stdout and stdout.count("tiny ") == 2
    assert "decoding: greedy" in (tmp_path / "greedy" / "report.md").read_text()

    assert main([*argv, "--temperature", "0.8", "--out", str(tmp_path / "sampled"), "--no-progress"]) == 0
    assert "decoding: sampled (temperature 0.8)" in capsys.readouterr().out
    assert "sampled (temperature 0.8)" in (tmp_path / "sampled" / "report.md").read_text()


@pytest.mark.parametrize("verbose", [False, True])
def test_eval_logs_like_a_stage(tiny_model, tmp_path, verbose):
    """Progress lines prefixed `wander:`; transformers' loading bar and library INFO chatter only with --verbose."""
    argv = ["--verbose"] if verbose else []
    argv += ["eval", "--policy", str(tiny_model), "--opponents", "random", "--games", "2", "--no-progress"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "WANDER_"))}
    done = subprocess.run(
        [sys.executable, "-m", "wander.cli", *argv, "--max-new-tokens", "8", "--out", str(tmp_path)],
        cwd=REPO,
        env={**env, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "wander: tiny: 4 games in" in done.stderr, done.stderr[-2000:]
    assert ("Loading weights" in done.stderr) == verbose, done.stderr[-2000:]


def test_teacher_serve_answers_over_http(tmp_path):
    """`wander teacher serve` is a real server a client can reach on loopback."""
    import socket
    import subprocess
    import sys
    import time

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "wander.cli", "teacher", "serve", "--port", str(port), "--skill", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1).json()
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and proc.poll() is None, "teacher server did not start"
                time.sleep(0.3)
        assert models["data"][0]["id"] == "tictactoe-teacher"
        body = {
            "model": "tictactoe-teacher",
            "messages": [{"role": "user", "content": "You O. Opp 4.\n.../.X./...\nmoves 01235678"}],
        }
        reply = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=10).json()
        # Skill 0 plays minimax: against a centre opening only a corner keeps the draw.
        assert reply["choices"][0]["message"]["content"].endswith(
            ("<move>0</move>", "<move>2</move>", "<move>6</move>", "<move>8</move>")
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
