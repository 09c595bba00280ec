"""The `wander` command line: each command's options and work in its own module, wired here."""

from __future__ import annotations

import argparse
import sys

from wander.cli import env_commands, eval_commands
from wander.cli.arguments import port_number
from wander.core.logs import configure_logging
from wander.core.offline import stay_offline
from wander.eval.matrix import MatrixInterrupted
from wander.policies import serve_model
from wander.policies.openai_policy import PolicyRequestError
from wander.ui import app as ui_app


def build_parser() -> argparse.ArgumentParser:
    """Argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="wander", description="Train small LMs with RL inside environments."
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="other libraries' INFO logs and progress bars too (as stages do)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    eval_commands.register(sub)
    env_commands.register(sub)
    serve_model.register(sub, port_number)
    ui_app.register(sub, port_number)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of `wander`."""
    stay_offline()  # before any tool (MLflow, the hub) is asked anything
    args = build_parser().parse_args(argv)
    configure_logging("wander", args.verbose)  # the stages' log setup: progress lines, no library chatter
    try:
        return args.func(args)
    except ValueError as exc:
        print(f"wander: error: {exc}", file=sys.stderr)
        return 2
    except (PolicyRequestError, MatrixInterrupted) as exc:  # an endpoint that failed: one line, no traceback
        print(f"wander: error: {exc}", file=sys.stderr)
        return 1
