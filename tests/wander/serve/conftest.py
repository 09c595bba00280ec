"""A tic-tac-toe environment served over OpenEnv on a loopback port, shared by the tests of a module."""

from __future__ import annotations

import pytest

from wander import load_environment
from wander.serve.limits import MAX_SESSIONS
from wander.serve.server import serve_env_in_thread

SETTINGS = dict(rendering="compact", history="full", num_groups=2, num_train=64, num_eval=16, num_test=16)


@pytest.fixture(scope="module")
def local_env():
    """The environment the server plays, built here too for local replays."""
    return load_environment("tictactoe", **SETTINGS)


@pytest.fixture(scope="module")
def served(local_env):
    """Base URL of a server playing `local_env`'s settings (its own instance of the env). Its tests are one client
    (this process) that opens up to 200 sessions at once, so that client may hold every one."""
    env = load_environment("tictactoe", **SETTINGS)
    with serve_env_in_thread(env, max_sessions_per_client=MAX_SESSIONS) as url:
        yield url
