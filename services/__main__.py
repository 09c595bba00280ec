"""`python -m services up|down|status|env|dvc-remote`: the team's servers on loopback, for development and tests.

    up          start PostgreSQL, S3 (SeaweedFS), MLflow and Prefect where not running; wait until each answers
    down        stop them (their data stays in the data folder)
    status      one line per service; exit 1 if any does not answer
    env         `export` lines of the variables a client needs: eval "$(python -m services env)"
    dvc-remote  add the DVC remote `team` on the S3 service to a repository's local (uncommitted) DVC config

The data folder is WANDER_SERVICES_DIR (default .services); ports and credentials: docs/team.md.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from services import dvc_remote, stack
from services.daemon import ServiceError
from services.settings import Settings, saved_credentials
from wander.core.logs import redact_url


def main(argv: list[str] | None = None) -> int:
    """Run one command; errors are one line on stderr, credentials redacted, exit code 1."""
    parser = argparse.ArgumentParser(prog="python -m services", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("up", "down", "status", "env"):
        commands.add_parser(name)
    remote = commands.add_parser("dvc-remote")
    remote.add_argument("repo", nargs="?", default=".", help="the repository (default: here)")
    remote.add_argument("--name", default=dvc_remote.REMOTE, help="the remote's name")
    remote.add_argument("--default", action="store_true", help="make it the remote dvc push/pull use")
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    try:
        return _run(args, settings)
    except ServiceError as e:
        print(_masked(str(e), settings), file=sys.stderr)
        return 1


def _run(args: argparse.Namespace, settings: Settings) -> int:
    if args.command == "up":
        stack.up(settings, report=_say)
        _say(f'services: up; point a shell at them with: eval "$({sys.executable} -m services env)"')
    elif args.command == "down":
        stack.down(settings, report=_say)
    elif args.command == "status":
        return 0 if stack.status(settings, report=_say) else 1
    elif args.command == "env":
        for key, value in stack.client_env(settings).items():
            print(f"export {key}={shlex.quote(value)}")
    elif args.command == "dvc-remote":
        credentials = saved_credentials(settings)
        if credentials is None:
            raise ServiceError(f"services: never started in {settings.root}: `make services` starts them")
        url = dvc_remote.configure(args.repo, settings, credentials, name=args.name, default=args.default)
        _say(f"dvc remote {args.name}: {url} at {settings.s3_endpoint} (in .dvc/config.local, not committed)")
    return 0


def _say(line: str) -> None:
    print(line, flush=True)


def _masked(text: str, settings: Settings) -> str:
    """`text` with URL credentials and every saved secret masked."""
    text = redact_url(text)
    try:
        credentials = saved_credentials(settings)
    except (OSError, ValueError, TypeError):
        credentials = None
    for secret in vars(credentials).values() if credentials is not None else ():
        text = text.replace(secret, "***")
    return text


if __name__ == "__main__":
    sys.exit(main())
