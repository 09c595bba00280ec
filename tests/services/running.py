"""A set of services under test: its settings, credentials and CLI, and the processes it started."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from services.settings import Credentials, Settings, saved_credentials

# A first `up` creates the cluster and migrates two schemas: ~20 s on 2 cores, alone.
CLI_TIMEOUT_SECONDS = 300


@dataclasses.dataclass
class Services:
    """Running services under test: their settings, credentials, and their CLI as `make services` runs it."""

    settings: Settings
    env: dict[str, str]  # the environment the CLI runs with: these settings, no credential given

    @property
    def credentials(self) -> Credentials:
        """The credentials the first `up` generated."""
        credentials = saved_credentials(self.settings)
        assert credentials is not None
        return credentials

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run `python -m services ARGS`; its output (stdout and stderr together) in `.stdout`."""
        result = subprocess.run(
            [sys.executable, "-m", "services", *args],
            env=self.env,
            cwd=self.settings.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=CLI_TIMEOUT_SECONDS,
        )
        if check:
            assert result.returncode == 0, result.stdout
        return result


def processes_of(root: Path) -> list[int]:
    """Every live process started for the data folder `root` (its environment names it), from /proc."""
    marker = f"WANDER_SERVICES_DIR={root}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found
