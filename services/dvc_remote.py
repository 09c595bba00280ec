"""A DVC remote on the S3 service, written to a repository's `.dvc/config.local`: DVC's own per-clone config,
which DVC keeps out of git (`.dvc/.gitignore`), so the endpoint and keys are never committed.

The same as `dvc remote add --local team s3://wander-dvc` plus `dvc remote modify --local team endpointurl ...`
(and the keys), in one process instead of four `dvc` runs; the file is made 0600, since it holds the secret key.
"""

from __future__ import annotations

import os
from pathlib import Path

from services.settings import DVC_BUCKET, S3_REGION, Credentials, Settings

REMOTE = "team"


def configure(
    repo: str | os.PathLike,
    settings: Settings,
    credentials: Credentials,
    name: str = REMOTE,
    default: bool = False,
) -> str:
    """Add (or update) remote `name` on the S3 service in `repo`'s local DVC config; with `default`, make it the
    remote `dvc push`/`pull` use; return its URL."""
    from dvc.config import Config

    dvc_dir = Path(repo).resolve() / ".dvc"
    url = f"s3://{DVC_BUCKET}"
    config = Config(dvc_dir=dvc_dir)
    with config.edit("local") as local:
        local["remote"][name] = {
            "url": url,
            "endpointurl": settings.s3_endpoint,
            "access_key_id": credentials.s3_access_key,
            "secret_access_key": credentials.s3_secret_key,
            "region": S3_REGION,
        }
        if default:
            local["core"]["remote"] = name
    (dvc_dir / "config.local").chmod(0o600)
    return url
