"""`python -m flows.dvc_stage STAGE [--force]`: what `dvc repro --single-item STAGE` does, through DVC's own API,
with DVC's switch for its git hints on.

The `dvc repro` command ends every stage it runs with six lines asking to `git add dvc.lock` and to turn on
auto-staging, and with "Use `dvc push` ...": forty lines a run that ask nothing of a pipeline run. DVC's SCM context
has a `quiet` switch for the first (the command line offers only `--quiet`, which hides DVC's errors too); the
second is printed by the command alone. DVC's own log lines (running, skipping, the lock file) and errors stay.
"""

from __future__ import annotations

import argparse
import logging
import sys

logger = logging.getLogger("dvc")


def reproduce(stage: str, force: bool = False) -> int:
    """Reproduce one stage of the repository here (its upstream untouched); 0 when done or unchanged, 1 on error."""
    from dvc.exceptions import DvcException  # importing dvc sets up its own log format and levels
    from dvc.repo import Repo

    try:
        with Repo() as repo:
            repo.scm_context.quiet = True  # no "To track the changes with git, run: ..." after each stage
            repo.reproduce(targets=[stage], single_item=True, force=force)
    except DvcException:
        logger.exception("")  # DVC's formatter writes "ERROR: <what failed> - <why>", as its command does
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse STAGE and --force; reproduce it."""
    parser = argparse.ArgumentParser(prog="python -m flows.dvc_stage", description=__doc__.splitlines()[0])
    parser.add_argument("stage", help="a stage of dvc.yaml, e.g. sft or grpo")
    parser.add_argument("--force", action="store_true", help="run it even when nothing it depends on changed")
    args = parser.parse_args(argv)
    return reproduce(args.stage, args.force)


if __name__ == "__main__":
    sys.exit(main())
