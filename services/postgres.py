"""PostgreSQL for MLflow's and Prefect's metadata: Debian's server binaries, one cluster in `<data folder>/postgres`.

PostgreSQL refuses to run as root, so as root the cluster belongs to, and the server runs as, the `postgres` system
user (Debian's package creates it; we create it where it is missing). The superuser connects only through a Unix
socket in the cluster's own 0700 folder (trust: whoever reaches that socket is root or the server's user); over TCP,
on loopback, every role needs its password (SCRAM). The `wander` role owns one database per server.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from services.daemon import Daemon, Service, ServiceError, short
from services.settings import DB_USER, HOST, MLFLOW_DB, PREFECT_DB, Credentials, Settings

if TYPE_CHECKING:
    import psycopg

OS_USER = "postgres"  # the system user Debian's package runs its clusters as
SUPERUSER = "postgres"
DEBIAN_BINARIES = "/usr/lib/postgresql"  # /usr/lib/postgresql/<major>/bin
INSTALL_HINT = "`make postgres` installs Debian's package (apt-get install postgresql)"
# Prefect's server needs trigram indexes in its database (it creates them in its migrations).
EXTENSIONS = {PREFECT_DB: ("pg_trgm",)}


def binaries() -> Path:
    """The folder of the newest PostgreSQL server binaries installed: Debian's layout first, then PATH (a folder
    that does not exist when neither has them)."""
    found = sorted(
        (int(m.group(1)), path)
        for path in Path(DEBIAN_BINARIES).glob("*/bin")
        if (m := re.fullmatch(r"(\d+)", path.parent.name)) and (path / "postgres").exists()
    )
    if found:
        return found[-1][1]
    on_path = shutil.which("postgres")
    return Path(on_path).resolve().parent if on_path else Path(DEBIAN_BINARIES) / "none" / "bin"


def os_user() -> str | None:
    """The user the server runs as: `postgres` (created if missing) when we are root, else ourselves (None)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(OS_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--user-group",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                OS_USER,
            ],
            check=True,
            capture_output=True,
        )
    return OS_USER


def folder(settings: Settings) -> Path:
    """The cluster's folder: its data directory and its socket folder."""
    return settings.root / "postgres"


def socket_dir(settings: Settings) -> Path:
    """Where the server puts its Unix socket (its superuser's only way in)."""
    return folder(settings) / "socket"


def service(settings: Settings, credentials: Credentials, env: dict[str, str]) -> Service:
    """The PostgreSQL service of these settings."""
    user = os_user()
    data = folder(settings) / "data"
    argv = [
        str(binaries() / "postgres"),
        "-D",
        str(data),
        "-p",
        str(settings.postgres_port),
        "-c",
        f"listen_addresses={HOST}",
        "-c",
        f"unix_socket_directories={socket_dir(settings)}",
    ]
    daemon = Daemon(
        name="postgres",
        argv=argv,
        env=env,
        pid_file=settings.pids / "postgres.pid",
        log_file=settings.logs / "postgres.log",
        user=user,
        stop_signal=signal.SIGINT,  # "fast" shutdown: end sessions, checkpoint, exit
        signal_group=False,  # the postmaster stops its own processes in order
    )
    return Service(
        name="postgres",
        uri=settings.postgres_uri("postgres"),
        daemon=daemon,
        health=lambda: health(settings, credentials),
        ready=lambda: _superuser_answers(settings),
        prepare=lambda: init_cluster(settings, user),
        provision=lambda: provision(settings, credentials),
        install_hint=INSTALL_HINT,
    )


def init_cluster(settings: Settings, user: str | None) -> None:
    """Create the cluster (initdb) on first start; make its folders the server user's."""
    base, data = folder(settings), folder(settings) / "data"
    for path in (base, socket_dir(settings)):
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        if user is not None:
            shutil.chown(path, user, user)
    if (data / "PG_VERSION").exists():
        return
    if user is not None and _run_as(user, ["test", "-w", str(base)]).returncode != 0:
        raise ServiceError(
            f"postgres: user {user} cannot write {base}: every folder above it needs o+x (chmod o+x), or set "
            "WANDER_SERVICES_DIR to a folder it can reach"
        )
    result = _run_as(
        user,
        [str(binaries() / "initdb"), "-D", str(data), "-U", SUPERUSER, "-E", "UTF8", "--locale=C"]
        + ["--auth-local=trust", "--auth-host=scram-sha-256"],
    )
    if result.returncode != 0:
        raise ServiceError(f"postgres: initdb failed: {result.stdout.strip().splitlines()[-1:]}")


def _run_as(user: str | None, argv: list[str]) -> subprocess.CompletedProcess:
    ids = {}
    if user is not None:
        account = pwd.getpwnam(user)
        ids = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd="/", **ids)


def _superuser(settings: Settings, database: str = "postgres") -> psycopg.Connection:
    import psycopg

    # Autocommit: CREATE DATABASE cannot run in a transaction.
    return psycopg.connect(
        host=str(socket_dir(settings)),
        port=settings.postgres_port,
        user=SUPERUSER,
        dbname=database,
        connect_timeout=3,
        autocommit=True,
    )


def _superuser_answers(settings: Settings) -> str | None:
    try:
        _superuser(settings).close()
    except Exception as e:  # any failure to connect is "not yet"
        return short(e)
    return None


def provision(settings: Settings, credentials: Credentials) -> None:
    """Create (or update) the `wander` role with its password, its databases and their extensions; idempotent."""
    from psycopg import sql

    connection = _superuser(settings)
    try:
        with connection.cursor() as cursor:
            # An error in the next statement must not write it, password and all, to the server's log.
            cursor.execute("SET log_min_error_statement = panic")
            cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [DB_USER])
            verb = "ALTER" if cursor.fetchone() else "CREATE"
            role = sql.Identifier(DB_USER)
            # A literal, not a parameter: the server binds no parameters in utility statements.
            password = sql.Literal(credentials.postgres_password)
            cursor.execute(sql.SQL(verb + " ROLE {} LOGIN PASSWORD {}").format(role, password))
            for database in (MLFLOW_DB, PREFECT_DB):
                cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database])
                if not cursor.fetchone():
                    cursor.execute(
                        sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(database), role)
                    )
    finally:
        connection.close()
    for database, extensions in EXTENSIONS.items():
        connection = _superuser(settings, database)
        try:
            with connection.cursor() as cursor:
                for extension in extensions:
                    cursor.execute(
                        sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(extension))
                    )
        finally:
            connection.close()


def connect(settings: Settings, credentials: Credentials, database: str = MLFLOW_DB) -> psycopg.Connection:
    """A psycopg connection to one database as the `wander` role, over TCP with its password (as clients do)."""
    import psycopg

    return psycopg.connect(
        host=HOST,
        port=settings.postgres_port,
        user=DB_USER,
        password=credentials.postgres_password,
        dbname=database,
        connect_timeout=3,
    )


def health(settings: Settings, credentials: Credentials) -> str | None:
    """None if the `wander` role can log in over TCP and run `SELECT 1`, else why not."""
    try:
        connection = connect(settings, credentials)
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
                cursor.fetchone()
        finally:
            connection.close()
    except Exception as e:  # a health check reports, never raises
        return short(e)
    return None
