"""`wander env serve NAME [KEY=VALUE ...]`: a real server process that OpenEnv's client plays; bad options are usage errors."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient

from wander.cli import build_parser, main


def test_settings_are_parsed_as_yaml_values():
    args = build_parser().parse_args(
        ["env", "serve", "tictactoe", "max_turns=6", "rendering=grid", "random_move_prob=[0.0, 0.5]"]
    )
    assert dict(args.settings) == {"max_turns": 6, "rendering": "grid", "random_move_prob": [0.0, 0.5]}
    assert (args.host, args.port, args.max_sessions, args.idle_ttl) == ("127.0.0.1", 8000, 256, 300.0)
    assert args.workers == 1 and args.max_sessions_per_client is None  # None: the server's default share


@pytest.mark.parametrize(
    "argv",
    [
        ["max_turns"],
        ["--port", "70000"],
        ["--max-sessions", "0"],
        ["--max-sessions-per-client", "0"],
        ["--idle-ttl", "-1"],
        ["--idle-ttl", "inf"],
        ["--workers", "0"],
        ["--seed", "x"],
    ],
)
def test_bad_options_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["env", "serve", "tictactoe", *argv])
    assert exit_info.value.code == 2


def test_an_unknown_setting_is_one_line_and_status_2(capsys):
    assert main(["env", "serve", "tictactoe", "colour=red"]) == 2
    assert "unknown tictactoe setting" in capsys.readouterr().err


def test_web_with_workers_is_one_line_and_status_2(capsys):
    assert main(["env", "serve", "tictactoe", "--web", "--workers", "2"]) == 2
    assert "--web serves one shared browser episode" in capsys.readouterr().err


def test_a_per_client_share_over_the_cap_is_one_line_and_status_2(capsys):
    argv = ["env", "serve", "tictactoe", "--max-sessions", "4", "--max-sessions-per-client", "5"]
    assert main(argv) == 2
    assert "--max-sessions-per-client 5 must be 1 to --max-sessions (4)" in capsys.readouterr().err


def test_more_workers_than_sessions_is_one_line_and_status_2(capsys):
    assert main(["env", "serve", "tictactoe", "--workers", "3", "--max-sessions", "2"]) == 2
    assert "--workers 3 needs 1 to --max-sessions (2) workers" in capsys.readouterr().err


@pytest.mark.slow
def test_the_served_process_plays_a_game_with_openenv_client():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable,
        "-m",
        "wander.cli",
        "env",
        "serve",
        "tictactoe",
        "max_turns=3",
        "--port",
        str(port),
        "--seed",
        "7",
        "--web",
    ]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ))
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                assert httpx.get(url + "/health", timeout=1).json()["status"] == "healthy"
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline, "server did not start"
                time.sleep(0.2)
        with GenericEnvClient(base_url=url).sync() as client:
            result = client.reset(seed=4)
            turns = 0
            while not result.done:
                result = client.step({"message": "no move"})
                turns += 1
        assert (
            turns == 3 and result.observation["values"]["invalid_moves"] == 3
        )  # the setting reached the env
        # `curl -X POST /reset -d '{}'`: an episode from a seed the server drew from --seed, reported to replay it.
        drawn = httpx.post(url + "/reset", json={}, timeout=10).json()
        seed = drawn["observation"]["metadata"]["seed"]
        replay = httpx.post(url + "/reset", json={"seed": seed}, timeout=10).json()
        assert replay["observation"]["messages"] == drawn["observation"]["messages"]
        assert drawn["observation"]["metadata"]["spec"]["seed"] == seed
        # --web: OpenEnv's Gradio page and its reset/step API play the same env.
        page = httpx.get(url + "/web/", timeout=30)
        assert page.status_code == 200 and "gradio" in page.text.lower()
        web = httpx.post(url + "/web/reset", json={}, timeout=10).json()
        assert web["observation"]["metadata"]["seed"] >= 0 and not web["done"]
        step = httpx.post(url + "/web/step", json={"action": {"message": "no move"}}, timeout=10).json()
        assert step["observation"]["values"] == {} and "no move" not in str(step["observation"]["messages"])
    finally:
        server.terminate()
        server.wait(timeout=10)
