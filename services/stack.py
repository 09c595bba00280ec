"""The four services as one stack: `up` starts what is not running (in dependency order) and waits until each
answers, `down` stops what runs, `status` checks each, `client_env` is what a client needs to use them.

`up` is safe to repeat: a running service is reported, not restarted, and its setup (the database role and
databases, the buckets) is checked again, which changes nothing that exists. Data lives in the data folder and
survives `down`.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import time
from collections.abc import Callable, Iterator

from services import http_servers, objectstore, postgres
from services.daemon import (
    EXTRA_HINT,
    Service,
    ServiceError,
    running_pid,
    short,
    start,
    stop,
    wait_until_healthy,
)
from services.settings import (
    CREDENTIALS,
    DVC_BUCKET,
    S3_REGION,
    Credentials,
    Settings,
    resolve_credentials,
    save_credentials,
    saved_credentials,
)
from wander.core.logs import redact_url
from wander.core.offline import OFFLINE_ENV

# A first start migrates MLflow's and Prefect's schemas: tens of seconds on 2 cores.
START_TIMEOUT_SECONDS = 180.0
# Started together, then waited on: each phase needs the one before it (the servers need the database and S3).
PHASES = (("postgres", "s3"), ("mlflow", "prefect"))
BUILDERS = {
    "postgres": postgres.service,
    "s3": objectstore.service,
    "mlflow": http_servers.mlflow,
    "prefect": http_servers.prefect,
}
CLIENT_MODULES = ("psycopg", "boto3")  # what the health checks and the setup import
Report = Callable[[str], None]


def services(settings: Settings, credentials: Credentials) -> dict[str, Service]:
    """Every service of these settings, in start order."""
    env = server_env()
    return {name: BUILDERS[name](settings, credentials, env) for phase in PHASES for name in phase}


def server_env() -> dict[str, str]:
    """The environment servers start with: ours without credentials meant for clients, telemetry off."""
    own = {env for env, _ in CREDENTIALS.values()}
    env = {key: value for key, value in os.environ.items() if key not in own and not key.startswith("AWS_")}
    return {**OFFLINE_ENV, **env}


@contextlib.contextmanager
def _locked(settings: Settings) -> Iterator[None]:
    """One `up` or `down` at a time on a data folder."""
    settings.root.mkdir(parents=True, exist_ok=True)
    # o+x and no more: PostgreSQL's user must reach its own folder inside; nobody else may list or read.
    settings.root.chmod(0o711)
    with open(settings.root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def up(
    settings: Settings, report: Report = print, timeout: float = START_TIMEOUT_SECONDS
) -> dict[str, Service]:
    """Start every service that is not running, wait until each answers, set up databases and buckets; return them."""
    missing = [name for name in CLIENT_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise ServiceError(f"services: {', '.join(missing)} missing: {EXTRA_HINT}")
    with _locked(settings):
        credentials = resolve_credentials(settings)
        stack = services(settings, credentials)
        running = {name: running_pid(service.daemon) for name, service in stack.items()}
        saved = saved_credentials(settings)
        if saved is not None and saved != credentials and any(running.values()):
            raise ServiceError(
                "services: the credentials differ from those the running services started with: "
                "`make services-down` first, then `make services`"
            )
        save_credentials(settings, credentials)
        for phase in PHASES:
            started = {}
            for name in phase:
                service = stack[name]
                if running[name] is not None:
                    report(f"{name}: already running (pid {running[name]}) at {redact_url(service.uri)}")
                    continue
                if not os.path.exists(service.daemon.argv[0]):
                    raise ServiceError(f"{name}: {service.daemon.argv[0]} not found: {service.install_hint}")
                began = time.monotonic()
                service.prepare()
                started[name] = (start(service.daemon), began)
            for name in phase:
                service = stack[name]
                pid, began = started.get(name, (running[name], None))
                wait_until_healthy(service, pid, timeout, service.ready or service.health)
                try:
                    service.provision()
                except Exception as e:  # a database's or S3's own error, in one line
                    raise ServiceError(
                        f"{name}: setting up at {redact_url(service.uri)} failed: {short(e)}"
                    ) from e
                wait_until_healthy(service, pid, timeout, service.health)
                if began is not None:
                    seconds = time.monotonic() - began
                    report(f"{name}: started (pid {pid}) at {redact_url(service.uri)} in {seconds:.1f} s")
        return stack


def down(settings: Settings, report: Report = print) -> list[str]:
    """Stop every running service (the servers before the database and S3 they use); return those stopped."""
    if not settings.root.exists():
        report("services: nothing to stop: no data folder")
        return []
    with _locked(settings):
        credentials = saved_credentials(settings) or resolve_credentials(settings)
        stack = services(settings, credentials)
        stopped = []
        for name in reversed(list(stack)):
            began = time.monotonic()
            if stop(stack[name].daemon):
                stopped.append(name)
                report(f"{name}: stopped in {time.monotonic() - began:.1f} s")
            else:
                report(f"{name}: not running")
        return stopped


def status(settings: Settings, report: Report = print) -> bool:
    """Check every service: one line each, a service down named with its URI (credentials redacted); True if all
    answer."""
    credentials = saved_credentials(settings)
    if credentials is None:
        report(f"services: never started in {settings.root}: `make services` starts them")
        return False
    healthy = True
    for name, service in services(settings, credentials).items():
        pid = running_pid(service.daemon)
        problem = service.health()
        uri = redact_url(service.uri)
        if problem is None:
            report(f"{name}: up at {uri}" + (f" (pid {pid})" if pid else " (not started by us)"))
        else:
            healthy = False
            report(f"{name}: down at {uri}: {problem}")
    return healthy


def client_env(settings: Settings) -> dict[str, str]:
    """The variables a client (a stage, DVC, boto3, the MLflow and Prefect clients) needs to use the services."""
    credentials = saved_credentials(settings)
    if credentials is None:
        raise ServiceError(f"services: never started in {settings.root}: `make services` starts them")
    return {
        "MLFLOW_TRACKING_URI": settings.mlflow_uri,
        "PREFECT_API_URL": settings.prefect_api_url,
        "AWS_ACCESS_KEY_ID": credentials.s3_access_key,
        "AWS_SECRET_ACCESS_KEY": credentials.s3_secret_key,
        "AWS_DEFAULT_REGION": S3_REGION,
        # boto3 and DVC's s3fs read AWS_ENDPOINT_URL; MLflow's own S3 client reads MLFLOW_S3_ENDPOINT_URL.
        "AWS_ENDPOINT_URL": settings.s3_endpoint,
        "MLFLOW_S3_ENDPOINT_URL": settings.s3_endpoint,
        # The team pipeline's workers make it their clone's default DVC remote (flows/team.py).
        "WANDER_DVC_REMOTE": f"s3://{DVC_BUCKET}",
    }
