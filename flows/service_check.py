"""The team services a run is pointed at, checked before any stage runs: one line per service that is down or
refuses the credentials.

What is checked is what the configuration names, nothing else: `MLFLOW_TRACKING_URI` when it is an http(s) server
(its `/health`, then an experiments search with `MLFLOW_TRACKING_USERNAME`/`_PASSWORD` or `MLFLOW_TRACKING_TOKEN`),
`PREFECT_API_URL` (its `/health`, then `/admin/version`, with `PREFECT_API_KEY` or `PREFECT_API_AUTH_STRING`), and
DVC's default remote when it is on S3 (a signed ListObjectsV2 with the remote's endpoint and keys, from DVC's own
config, or else boto3's usual chain: AWS_*, a profile). With none of them set (the embedded default: a sqlite
store, Prefect's ephemeral API, a local DVC remote) it makes no network call. Needs neither Prefect nor MLflow.
"""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from services.daemon import short
from wander.core.logs import redact_url

TIMEOUT_SECONDS = 5.0
# The make target that installs the services extra (boto3, dvc-s3) alone, without starting any server.
EXTRA_TARGET = "make services-deps"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def check_services(root: Path, env: Mapping[str, str] | None = None) -> list[str]:
    """One line per configured service that does not answer or refuses the credentials; [] when all answer."""
    env = os.environ if env is None else env
    found = [mlflow_problem(env), prefect_problem(env), dvc_remote_problem(root)]
    return [redact_url(line) for line in found if line]


def refuse_when_down(prog: str, root: Path) -> int:
    """Print `prog: <problem>` to stderr for each configured service that cannot be used; 2 if any, else 0."""
    problems = check_services(root)
    for line in problems:
        print(f"{prog}: {line}", file=sys.stderr)
    return 2 if problems else 0


def mlflow_problem(env: Mapping[str, str]) -> str | None:
    """Why the MLflow server of MLFLOW_TRACKING_URI cannot be used, or None (also when it names no server)."""
    uri = env.get("MLFLOW_TRACKING_URI", "").rstrip("/")
    if not uri.startswith(("http://", "https://")):
        return None  # unset, or a file/sqlite store: nothing to reach
    where = f"mlflow at {uri}"
    fix = "start it (make services) or fix MLFLOW_TRACKING_URI"
    user = env.get("MLFLOW_TRACKING_USERNAME")
    pair = f"{user}:{env.get('MLFLOW_TRACKING_PASSWORD', '')}" if user else None
    headers = _authorization(env.get("MLFLOW_TRACKING_TOKEN"), pair)
    verify: bool | str = env.get("MLFLOW_TRACKING_SERVER_CERT_PATH") or not _true(
        env.get("MLFLOW_TRACKING_INSECURE_TLS")
    )
    probes = [("GET", "/health", None), ("POST", "/api/2.0/mlflow/experiments/search", {"max_results": 1})]
    return _http_problem(
        uri,
        probes,
        headers,
        verify,
        where,
        fix,
        "MLFLOW_TRACKING_USERNAME/_PASSWORD or MLFLOW_TRACKING_TOKEN",
    )


def prefect_problem(env: Mapping[str, str]) -> str | None:
    """Why the Prefect API of PREFECT_API_URL cannot be used, or None (also when unset: the ephemeral API)."""
    url = env.get("PREFECT_API_URL", "").rstrip("/")
    if not url:
        return None
    where = f"prefect at {url}"
    fix = "start it (make services) or fix PREFECT_API_URL"
    headers = _authorization(env.get("PREFECT_API_KEY"), env.get("PREFECT_API_AUTH_STRING"))
    verify = not _true(env.get("PREFECT_API_TLS_INSECURE_SKIP_VERIFY"))
    # Prefect Cloud has no admin API: a workspace's flows answer only with a valid key.
    cloud = urlsplit(url).hostname == "api.prefect.cloud"
    authed = ("POST", "/flows/filter", {"limit": 1}) if cloud else ("GET", "/admin/version", None)
    return _http_problem(
        url,
        [("GET", "/health", None), authed],
        headers,
        verify,
        where,
        fix,
        "PREFECT_API_KEY or PREFECT_API_AUTH_STRING",
    )


def _authorization(token: str | None, user_password: str | None) -> dict[str, str]:
    """The Authorization header of a bearer token, else of `user:password` (basic), else none."""
    if token:
        return {"Authorization": f"Bearer {token}"}
    if user_password:
        return {"Authorization": f"Basic {base64.b64encode(user_password.encode()).decode()}"}
    return {}


def _http_problem(
    base: str,
    probes: list[tuple[str, str, Any]],
    headers: dict[str, str],
    verify: bool | str,
    where: str,
    fix: str,
    credentials: str,
) -> str | None:
    """Run each (method, path, json) probe against `base`; the first failure as one line, or None."""
    import httpx

    # A proxy set for the outside world must not carry loopback requests; a remote server gets the usual proxies.
    trust_env = urlsplit(base).hostname not in LOOPBACK
    try:
        with httpx.Client(
            timeout=TIMEOUT_SECONDS, headers=headers, verify=verify, trust_env=trust_env
        ) as client:
            for method, path, body in probes:
                response = client.request(method, base + path, json=body)
                if response.status_code in (401, 403):
                    return f"{where} refused the credentials ({response.status_code}); fix {credentials}"
                if response.status_code != 200:
                    return f"{where} answered HTTP {response.status_code} to {path}; {fix}"
    except httpx.HTTPError as e:
        return f"{where} is not answering ({_why(e)}); {fix}"
    return None


def dvc_remote_problem(root: Path) -> str | None:
    """Why DVC's default remote of `root` cannot be used when it is on S3, or None (no S3 remote: nothing to check)."""
    from dvc.config import Config

    dvc_dir = Path(root) / ".dvc"
    if not dvc_dir.is_dir():
        return None
    try:
        config = Config(dvc_dir=dvc_dir)  # every level: system, global, .dvc/config, .dvc/config.local
    except Exception as e:  # a broken config is reported, not raised
        return f"dvc config in {dvc_dir} cannot be read ({short(e)}); fix it (dvc config --list)"
    name = config["core"].get("remote")
    remote = config["remote"].get(name) if name else None
    if not remote or not str(remote.get("url", "")).startswith("s3://"):
        return None
    url = remote["url"]
    endpoint = remote.get("endpointurl")
    # Without one in the config, boto3 (and DVC) read AWS_ENDPOINT_URL.
    shown = endpoint or os.environ.get("AWS_ENDPOINT_URL")
    where = f"dvc remote {name} ({url}{f' at {shown}' if shown else ''})"
    try:
        import boto3
        from botocore.config import Config as BotoConfig
    except ImportError:
        return f"{where} needs boto3, which is not installed: install the services extra ({EXTRA_TARGET})"
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    session = boto3.Session(
        aws_access_key_id=remote.get("access_key_id"),
        aws_secret_access_key=remote.get("secret_access_key"),
        aws_session_token=remote.get("session_token"),
        profile_name=remote.get("profile"),
        region_name=remote.get("region"),
    )
    timeouts = {"connect_timeout": TIMEOUT_SECONDS, "read_timeout": TIMEOUT_SECONDS}
    s3 = session.client(
        "s3",
        endpoint_url=endpoint,
        verify=remote.get("ssl_verify", True),
        config=BotoConfig(retries={"max_attempts": 1}, **timeouts),
    )
    return _s3_problem(s3, bucket, prefix, name, where)


def _s3_problem(s3: Any, bucket: str, prefix: str, name: str, where: str) -> str | None:
    """A signed ListObjectsV2 of the remote's prefix; its failure as one line, or None."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    keys = "access_key_id/secret_access_key"
    try:
        s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
    except NoCredentialsError:
        return f"{where} has no credentials; set its {keys} (dvc remote modify --local {name} ...) or AWS_*"
    except ClientError as e:
        code = e.response.get("Error", {}).get("Code", "?")
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code == "NoSuchBucket":
            return f"{where} has no bucket {bucket}; create it or fix the remote's url"
        if status in (401, 403) or code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied"):
            return (
                f"{where} refused the credentials ({code}); fix its {keys} "
                f"(dvc remote modify --local {name} ...) or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
            )
        return (
            f"{where} answered {code} (HTTP {status}); fix the remote (dvc remote modify --local {name} ...)"
        )
    except BotoCoreError as e:
        fix = f"start it (make services) or fix its endpointurl (dvc remote modify --local {name} endpointurl URL)"
        return f"{where} is not answering ({_why(e)}); {fix}"
    return None


def _why(error: BaseException) -> str:
    """A connection failure in a few words: refused, timed out, unknown host, or its type and first line."""
    text = f"{error} {getattr(error, 'kwargs', {}).get('error', '')}".lower()
    if "refused" in text:
        return "connection refused"
    if "timed out" in text or "timeout" in type(error).__name__.lower():
        return f"no answer in {TIMEOUT_SECONDS:g} s"
    if "name or service not known" in text or "nodename nor servname" in text or "name resolution" in text:
        return "unknown host"
    return short(error)


def _true(value: str | None) -> bool:
    """An environment flag's truth: 1, true, yes, on."""
    return (value or "").strip().lower() in ("1", "true", "yes", "on")
