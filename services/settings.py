"""Where the services live and how to reach them: the data folder, the loopback ports, the credentials.

Every value has one default here and one environment variable that overrides it. Credentials come from the
environment or, failing that, from `<data folder>/credentials.json` (0600), which the first `up` writes with random
values; an `up` whose credentials differ from the saved ones while a service runs is refused, since a running
server keeps the ones it started with.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import secrets
import socket
import string
from pathlib import Path

from wander.core.atomic_io import write_atomic

HOST = "127.0.0.1"  # loopback only: these are development servers without TLS
DIR_ENV = "WANDER_SERVICES_DIR"
DEFAULT_DIR = ".services"
# Each port: (environment variable, default). The defaults sit away from each tool's own default (5432, 8333,
# 5000, 4200), so a system PostgreSQL or `make ui` on the same machine does not collide.
PORTS = {
    "postgres": ("WANDER_POSTGRES_PORT", 15432),
    "s3": ("WANDER_S3_PORT", 18333),
    # The first of SeaweedFS's internal ports (master, volume, filer, their gRPC ports, S3's gRPC, admin):
    # SEAWEED_PORT_COUNT in a row from here, and the admin's gRPC 10000 above its HTTP port (weed's rule).
    "seaweed": ("WANDER_SEAWEED_PORTS", 19330),
    "mlflow": ("WANDER_MLFLOW_PORT", 15000),
    "prefect": ("WANDER_PREFECT_PORT", 14200),
}
SEAWEED_PORT_COUNT = 8
CREDENTIALS_FILE = "credentials.json"
# Each credential: (environment variable that provides it, length of a generated one).
CREDENTIALS = {
    "postgres_password": ("WANDER_POSTGRES_PASSWORD", 32),
    "s3_access_key": ("WANDER_S3_ACCESS_KEY", 20),
    "s3_secret_key": ("WANDER_S3_SECRET_KEY", 40),
}
DB_USER = "wander"  # the PostgreSQL role MLflow and Prefect connect as
MLFLOW_DB = "mlflow"
PREFECT_DB = "prefect"
MLFLOW_BUCKET = "wander-mlflow"
DVC_BUCKET = "wander-dvc"
S3_REGION = "us-east-1"  # SeaweedFS ignores it; boto3 and DVC want one


@dataclasses.dataclass(frozen=True)
class Settings:
    """The data folder and the ports of one set of services."""

    root: Path
    postgres_port: int
    s3_port: int
    seaweed_port: int
    mlflow_port: int
    prefect_port: int

    @classmethod
    def from_env(cls, root: str | os.PathLike | None = None) -> Settings:
        """Settings from the environment (`WANDER_SERVICES_DIR`, `WANDER_*_PORT`), each unset one its default."""
        folder = Path(root if root is not None else os.environ.get(DIR_ENV) or DEFAULT_DIR)
        ports = {name: int(os.environ.get(env) or default) for name, (env, default) in PORTS.items()}
        return cls(root=folder.resolve(), **{f"{name}_port": port for name, port in ports.items()})

    @classmethod
    def on_free_ports(cls, root: str | os.PathLike) -> Settings:
        """Settings in `root` on ports free now (for tests, beside a `make services` on the defaults)."""
        with contextlib.ExitStack() as held:  # hold each port until all are picked: no port picked twice
            singles = [_bound(held, 0) for _ in ("postgres", "s3", "mlflow", "prefect")]
            block = _free_block(held)
        postgres, s3, mlflow, prefect = singles
        return cls(Path(root).resolve(), postgres, s3, block, mlflow, prefect)

    def env(self) -> dict[str, str]:
        """These settings as the environment variables `from_env` reads (for a child `python -m services`)."""
        ports = {env: str(getattr(self, f"{name}_port")) for name, (env, _) in PORTS.items()}
        return {DIR_ENV: str(self.root), **ports}

    @property
    def logs(self) -> Path:
        """The folder of the servers' logs."""
        return self.root / "logs"

    @property
    def pids(self) -> Path:
        """The folder of the servers' pid files."""
        return self.root / "run"

    @property
    def s3_endpoint(self) -> str:
        """The S3 API's URL."""
        return f"http://{HOST}:{self.s3_port}"

    @property
    def mlflow_uri(self) -> str:
        """The MLflow tracking server's URL."""
        return f"http://{HOST}:{self.mlflow_port}"

    @property
    def prefect_api_url(self) -> str:
        """The Prefect server's API URL."""
        return f"http://{HOST}:{self.prefect_port}/api"

    def postgres_uri(self, database: str, driver: str = "postgresql") -> str:
        """A SQLAlchemy URL of one database, without the password: clients read PGPASSWORD (libpq, asyncpg)."""
        return f"{driver}://{DB_USER}@{HOST}:{self.postgres_port}/{database}"


def _bound(held: contextlib.ExitStack, port: int) -> int:
    """Bind a loopback port (0: any free one) and hold it until `held` closes; return its number."""
    sock = held.enter_context(socket.socket())
    sock.bind((HOST, port))
    return sock.getsockname()[1]


def _free_block(held: contextlib.ExitStack) -> int:
    """The first of SEAWEED_PORT_COUNT free ports in a row, whose last (the admin's) is also free 10000 higher."""
    for _ in range(100):
        first = random.randrange(20000, 30000)
        try:
            with contextlib.ExitStack() as trying:
                for port in [
                    *range(first, first + SEAWEED_PORT_COUNT),
                    first + SEAWEED_PORT_COUNT - 1 + 10000,
                ]:
                    _bound(trying, port)
                held.push(trying.pop_all())
                return first
        except OSError:
            continue
    raise OSError("no block of free ports found")


@dataclasses.dataclass(frozen=True)
class Credentials:
    """The PostgreSQL role's password and the S3 identity's key pair."""

    postgres_password: str
    s3_access_key: str
    s3_secret_key: str

    def __repr__(self) -> str:  # a traceback or a debug print must not show them
        return "Credentials(***)"


def credentials_path(settings: Settings) -> Path:
    """The file that keeps the credentials of these services."""
    return settings.root / CREDENTIALS_FILE


def saved_credentials(settings: Settings) -> Credentials | None:
    """The credentials the services were last started with, if any."""
    path = credentials_path(settings)
    return Credentials(**json.loads(path.read_text())) if path.exists() else None


def resolve_credentials(settings: Settings) -> Credentials:
    """Each credential from its environment variable, else the saved one, else a new random one."""
    saved = saved_credentials(settings)
    values = {}
    for field, (env, length) in CREDENTIALS.items():
        if os.environ.get(env):
            values[field] = os.environ[env]
        elif saved is not None:
            values[field] = getattr(saved, field)
        else:
            # Letters and digits only: each lands in URLs, a JSON file and shell `export` lines as it is.
            values[field] = "".join(
                secrets.choice(string.ascii_letters + string.digits) for _ in range(length)
            )
    return Credentials(**values)


def save_credentials(settings: Settings, credentials: Credentials) -> Path:
    """Write the credentials to the data folder, readable by its owner only."""
    return write_private(
        credentials_path(settings), json.dumps(dataclasses.asdict(credentials), indent=2) + "\n"
    )


def write_private(path: Path, text: str) -> Path:
    """Write a text file atomically, mode 0600 from its creation on (never readable by others, not even briefly)."""

    def write(tmp: Path) -> None:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as f:
            f.write(text)

    return write_atomic(path, write)
