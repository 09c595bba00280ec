"""The command line every stage shares: `python -m tasks.<stage> [--params params.yaml] [--profile smoke]`.

It loads and checks the whole params file (tasks.plumbing.params), hands the stage only the sections it declares
(tasks.plumbing.sections.READS), runs it inside its MLflow run (nested under WANDER_PARENT_RUN_ID when set), and turns the
errors a person can fix (bad params, failed validation) into one readable message and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence

from tasks.plumbing.params import ParamsError, add_params_arguments, load_params, restrict
from tasks.plumbing.sections import READS, Params
from tasks.plumbing.validation import DataValidationError, InputError
from wander.core.logs import configure_logging


def stage_main(
    stage: str, run: Callable[[Params], dict], argv: Sequence[str] | None = None, run_name: str | None = None
) -> int:
    """Parse the stage's options, load its params, run it under MLflow; return the process exit status."""
    parser = argparse.ArgumentParser(
        prog=f"python -m tasks.{stage}", description=f"The {stage} stage of wander."
    )
    add_params_arguments(parser)
    parser.add_argument("--no-mlflow", action="store_true", help="do not log an MLflow run")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="library INFO logs (every HTTP request) and progress bars (or WANDER_LOG_LEVEL=DEBUG)",
    )
    args = parser.parse_args(argv)
    configure_logging(stage, args.verbose)
    try:
        params = load_params(args.params, args.profile)
    except ParamsError as e:
        print(f"{stage}: error: {e}", file=sys.stderr)
        return 2
    start = time.monotonic()
    try:
        if args.no_mlflow:
            metrics = run(restrict(params, stage))
        else:
            from tasks.plumbing.tracking import stage_run

            logged = {s: getattr(params, s).model_dump(mode="json") for s in READS[stage]}
            with stage_run(run_name or stage, logged):
                metrics = run(restrict(params, stage))
    except (DataValidationError, InputError, ParamsError, FileNotFoundError) as e:
        print(f"{stage}: error: {e}", file=sys.stderr)
        return 2
    logging.getLogger(stage).info(
        "done in %.1f s: %s", time.monotonic() - start, json.dumps(headline(metrics), default=str)
    )
    return 0


def headline(metrics: dict) -> dict:
    """The numbers of a metrics dict, nested ones as `a.b.c`, for a one-line summary."""
    from tasks.plumbing.tracking import flatten

    flat = flatten(metrics, sep=".")
    return {k: v for k, v in flat.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
