"""`wander eval` against endpoints and outputs that fail: checked before playing, partial rows kept, one line."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from envs.tictactoe import RandomPlayer
from wander import load_environment
from wander.cli import main
from wander.core.policy import Conversation, Reply
from wander.eval.config import EvaluateConfig
from wander.eval.evaluation import evaluate
from wander.eval.matrix import MatrixInterrupted
from wander.policies.openai_policy import OpenAIPolicy
from wander.policies.openai_policy_config import OpenAIPolicyConfig
from wander.policies.openai_server import serve_in_thread, teacher_app


def closed_port() -> int:
    """A loopback port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def teacher_url() -> Iterator[str]:
    with serve_in_thread(teacher_app(load_environment("tictactoe"))) as url:
        yield url


class CountingPlayer(RandomPlayer):
    """A random player that counts the conversations it answered."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.answered = 0

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        self.answered += len(conversations)
        return super().__call__(conversations)


def test_readme_example_works_without_naming_the_model(teacher_url: str, tmp_path: Path, capsys) -> None:
    # The README's own command: no --api-model, the server serves one model under another name.
    argv = ["eval", "--policy", f"teacher={teacher_url}", "--opponents", "random", "--games", "3"]
    assert main([*argv, "--out", str(tmp_path / "r"), "--no-progress"]) == 0
    assert "teacher " in capsys.readouterr().out and (tmp_path / "r" / "matrix.csv").exists()


def test_the_only_served_model_is_picked_and_a_named_one_is_kept(teacher_url: str) -> None:
    conversation = [{"role": "user", "content": "You X, first.\n.../.../...\nmoves 012345678"}]
    assert OpenAIPolicy(OpenAIPolicyConfig(base_url=teacher_url)).resolve_model() == "tictactoe-teacher"
    policy = OpenAIPolicy(OpenAIPolicyConfig(base_url=teacher_url))
    assert policy([conversation])[0].content.endswith("</move>") and policy.model == "tictactoe-teacher"
    named = OpenAIPolicy(OpenAIPolicyConfig(base_url=teacher_url, model="other", max_retries=0))
    with pytest.raises(Exception, match="HTTP 404"):
        named([conversation])


def test_an_existing_file_as_out_fails_before_any_game(tmp_path: Path, capsys) -> None:
    out = tmp_path / "report.txt"
    out.write_text("keep me")
    player = CountingPlayer()
    config = EvaluateConfig(
        policies={"p": "random"}, opponents=["random"], games=2, out_dir=str(out), baseline=None
    )
    with pytest.raises(ValueError, match="is an existing file, not a folder"):
        evaluate(config, built={"p": player})
    assert player.answered == 0 and out.read_text() == "keep me"
    assert main(["eval", "--games", "2", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == f"wander: error: output folder {out} is an existing file, not a folder; name a folder (it is created if missing)"
    )


def test_a_failed_row_keeps_the_finished_rows(tmp_path: Path) -> None:
    dead = OpenAIPolicy(
        OpenAIPolicyConfig(base_url=f"http://127.0.0.1:{closed_port()}/v1", model="m", max_retries=0)
    )
    out = tmp_path / "partial"
    config = EvaluateConfig(
        policies={"random": "random", "dead": "http://unused/v1", "minimax": "minimax"},
        opponents=["random"],
        games=3,
        out_dir=str(out),
        baseline=None,
    )
    with pytest.raises(MatrixInterrupted) as info:
        evaluate(config, built={"dead": dead})
    assert str(info.value).startswith(
        "policy row 'dead' failed: chat completion request to http://127.0.0.1:"
    )
    assert str(info.value).endswith(f"the rows that finished (random) are written to {out}/")
    csv = (out / "matrix.csv").read_text()
    assert "random" in csv and "dead" not in csv and "minimax" not in csv.split("\n", 1)[1]


def test_an_unreachable_url_ends_in_one_line(tmp_path: Path, capsys) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    argv = ["eval", "--policy", f"gone={url}", "--api-model", "m", "--opponents", "random", "--games", "1"]
    assert main([*argv, "--out", str(tmp_path / "r"), "--no-progress"]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(
        f"wander: error: chat completion request to {url}/chat/completions (model 'm') failed"
    )
    assert "connection error" in last and "Traceback" not in last


@pytest.mark.parametrize(("port", "shown"), [("99999", "99999"), ("-1", "-1"), ("http", "'http'")])
def test_a_bad_port_is_a_usage_error_not_a_traceback(port: str, shown: str, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["teacher", "serve", "--port", port])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith(f"argument --port: {shown} is not a port number (0-65535)")
