"""`env.url`: where the stages play episodes, checked before any is played, with the fix in the message."""

from __future__ import annotations

import pytest

from tasks.params.load import ParamsError, load_params
from tasks.params.shared_sections import Env
from tasks.runtime.episodes import episode_env, serve_command
from tasks.runtime.validation import InputError
from wander import load_environment
from wander.serve.served import ServedEnvironment
from wander.serve.server import serve_env_in_thread


def section(**values: object) -> Env:
    return Env.from_kwargs({"name": "tictactoe", "rendering": "board", "max_turns": 8, **values})


def test_null_plays_here_and_a_bad_url_is_refused_when_params_load(tmp_path):
    local = load_environment("tictactoe")
    assert episode_env(section(), local) is local
    assert "url" not in section(url="http://127.0.0.1:8000").kwargs()  # never a setting of the env itself
    for url in ("ws://127.0.0.1:8000", "127.0.0.1:8000", "http://user:secret@ host"):
        with pytest.raises(ParamsError) as found:
            load_params(params={"env": {"name": "tictactoe", "url": url}})
        message = str(found.value)
        assert "section 'env': key 'url': must be a `wander env serve` base URL" in message
        assert "secret" not in message


def test_no_server_names_the_key_and_the_command_that_starts_it_without_the_credentials():
    env = section(url="http://user:secret@127.0.0.1:9", random_move_prob=(0.0, 0.5))
    with pytest.raises(InputError) as found:
        episode_env(env, load_environment("tictactoe"))
    message = str(found.value)
    assert message.startswith("env.url: no OpenEnv server at http://***@127.0.0.1:9")
    assert (
        "wander env serve tictactoe rendering=board max_turns=8 'random_move_prob=[0.0, 0.5]' --port 9"
        in message
    )
    assert "env.url: null" in message and "secret" not in message


def test_a_server_of_other_settings_is_refused_and_a_matching_one_is_used():
    with serve_env_in_thread(load_environment("tictactoe", rendering="grid")) as url:
        with pytest.raises(InputError, match="setting rendering is 'grid' there, 'board' here"):
            episode_env(section(url=url), load_environment("tictactoe", rendering="board"))
        served = episode_env(
            section(url=url, rendering="grid"), load_environment("tictactoe", rendering="grid")
        )
        assert isinstance(served, ServedEnvironment)


def test_a_server_without_room_for_the_stages_live_episodes_is_refused_with_the_capacity_to_serve():
    with serve_env_in_thread(load_environment("tictactoe"), max_sessions=8, max_sessions_per_client=8) as url:
        env = section(url=url)
        assert isinstance(episode_env(env, load_environment("tictactoe"), live=8), ServedEnvironment)
        with pytest.raises(InputError) as found:
            episode_env(env, load_environment("tictactoe"), live=300)
    assert "plays 300 episodes at once, one session each, but the server at" in str(found.value)
    assert "takes at most 8 sessions" in str(found.value)
    assert "--max-sessions 300 --max-sessions-per-client 300" in str(found.value)


def test_a_server_whose_per_client_share_cannot_hold_the_stages_live_episodes_is_refused():
    with serve_env_in_thread(load_environment("tictactoe"), max_sessions=8) as url:  # 4 per client
        env = section(url=url)
        assert isinstance(episode_env(env, load_environment("tictactoe"), live=4), ServedEnvironment)
        with pytest.raises(InputError) as found:
            episode_env(env, load_environment("tictactoe"), live=5)
    message = str(found.value)
    assert "lets one client (this machine) hold at most 4 sessions; restart it with" in message
    # A default server holds 5 from one client: the command is the plain one.
    assert message.endswith(f"--port {url.rsplit(':', 1)[1]}")
    assert serve_command(section(url="http://127.0.0.1:8000"), live=200).endswith(
        "--port 8000 --max-sessions-per-client 200"
    )


def test_serve_command_binds_every_interface_for_a_remote_host():
    assert serve_command(section(url="http://10.0.0.5:8100/")) == (
        "wander env serve tictactoe rendering=board max_turns=8 --host 0.0.0.0 --port 8100"
    )
