"""The team's servers for the tests: started once per session, the way `make services` starts them (`python -m
services up`), in a temporary data folder on free ports; stopped (`python -m services down`) at the end."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.settings import CREDENTIALS, Settings

from .running import Services, processes_of


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    """The four services, up; stopped and their folder removed after the session, with no process left."""
    # Not pytest's tmp_path: its base is 0700, and PostgreSQL's user must reach its folder inside ours.
    root = Path(tempfile.mkdtemp(prefix="wander-services-"))
    settings = Settings.on_free_ports(root)
    own = {env for env, _ in CREDENTIALS.values()}
    env = {key: value for key, value in os.environ.items() if key not in own} | settings.env()
    running = Services(settings, env)
    try:
        running.cli("up")
        yield running
    finally:
        down = running.cli("down", check=False)
        left = processes_of(settings.root)
        shutil.rmtree(root, ignore_errors=True)
        assert down.returncode == 0 and not left, f"processes left after `down`: {left}\n{down.stdout}"
