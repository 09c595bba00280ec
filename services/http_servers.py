"""The MLflow tracking server and the Prefect server, both on PostgreSQL; MLflow's artifacts in the S3 service.

Neither gets a password on its command line (visible to every local user in `ps`): their database URLs name the
role only, and libpq (MLflow's psycopg) and asyncpg (Prefect's driver) read the password from PGPASSWORD in the
server's environment. MLflow serves artifacts itself (`--serve-artifacts`, its default): clients upload to it, and
only the server holds the S3 keys.
"""

from __future__ import annotations

from services.daemon import Daemon, Service, program, short
from services.settings import HOST, MLFLOW_BUCKET, MLFLOW_DB, PREFECT_DB, S3_REGION, Credentials, Settings

ARTIFACTS = f"s3://{MLFLOW_BUCKET}/artifacts"
HEALTH_TIMEOUT_SECONDS = 5.0
# Prefect's server reads these from the environment it inherits; from a client's shell they would point it at
# another server or profile.
PREFECT_CLIENT_ENV = ("PREFECT_API_URL", "PREFECT_API_KEY", "PREFECT_PROFILE")


def mlflow(settings: Settings, credentials: Credentials, env: dict[str, str]) -> Service:
    """The MLflow tracking server: runs and the registry in PostgreSQL, artifacts in the S3 service."""
    server_env = {
        **env,
        "PGPASSWORD": credentials.postgres_password,
        "AWS_ACCESS_KEY_ID": credentials.s3_access_key,
        "AWS_SECRET_ACCESS_KEY": credentials.s3_secret_key,
        "AWS_DEFAULT_REGION": S3_REGION,
        "MLFLOW_S3_ENDPOINT_URL": settings.s3_endpoint,
        # Its job runner (GenAI scorers, trace rollups: nothing wander asks for) is seven more processes, ~1.2 GB.
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    }
    argv = [
        str(program("mlflow")),
        "server",
        "--host",
        HOST,
        "--port",
        str(settings.mlflow_port),
        "--workers",
        "1",  # two cores: one worker answers a team's handful of clients
        "--backend-store-uri",
        settings.postgres_uri(MLFLOW_DB),
        "--artifacts-destination",
        ARTIFACTS,
    ]
    return Service(
        name="mlflow",
        uri=settings.mlflow_uri,
        daemon=Daemon("mlflow", argv, server_env, settings.pids / "mlflow.pid", settings.logs / "mlflow.log"),
        health=lambda: http_health(f"{settings.mlflow_uri}/health"),
    )


def prefect(settings: Settings, credentials: Credentials, env: dict[str, str]) -> Service:
    """The Prefect server (API, UI, scheduler and the other services) on PostgreSQL."""
    server_env = {key: value for key, value in env.items() if key not in PREFECT_CLIENT_ENV}
    server_env |= {
        "PGPASSWORD": credentials.postgres_password,
        "PREFECT_HOME": str(settings.root / "prefect"),  # its profiles and UI build here, not in ~/.prefect
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": settings.postgres_uri(
            PREFECT_DB, driver="postgresql+asyncpg"
        ),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_UI_API_URL": settings.prefect_api_url,
    }
    argv = [str(program("prefect")), "server", "start", "--host", HOST, "--port", str(settings.prefect_port)]
    return Service(
        name="prefect",
        uri=settings.prefect_api_url,
        daemon=Daemon(
            "prefect", argv, server_env, settings.pids / "prefect.pid", settings.logs / "prefect.log"
        ),
        health=lambda: http_health(f"{settings.prefect_api_url}/health"),
    )


def http_health(url: str) -> str | None:
    """None if GET `url` answers 200, else why not."""
    import httpx

    try:
        # trust_env=False: a proxy set for the registries must not carry loopback requests.
        response = httpx.get(url, timeout=HEALTH_TIMEOUT_SECONDS, trust_env=False)
    except httpx.HTTPError as e:
        return short(e)
    return None if response.status_code == 200 else f"HTTP {response.status_code}"
