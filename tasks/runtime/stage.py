"""The command line every stage shares: `python -m tasks.<stage> [--params params.yaml] [--profile smoke]`.

It loads and checks the whole params file (tasks.params.load), hands the stage only the sections it declares
(tasks.params.sections.READS), runs it inside its MLflow run (nested under WANDER_PARENT_RUN_ID when set), and turns the
errors a person can fix (bad params, failed validation) into one readable message and exit status 2.

Stop means stop: SIGTERM or SIGINT unwinds the stage (its teacher or vLLM server stopped, its MLflow run ended
KILLED) and it exits 128 + the signal; a stage also stops itself when the process that ran it ends, even by SIGKILL:
DVC (`DVC_STAGE` is set: DVC's stage command) and the flow (`WANDER_STOP_WITH_PID`). What it journaled or
checkpointed stays, so the next run resumes it.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence

from tasks.params.launch_checks import launch_problems, launched
from tasks.params.load import ParamsError, add_params_arguments, load_params, restrict
from tasks.params.nested_keys import flatten
from tasks.params.sections import READS
from tasks.runtime.launch import is_worker, process_index, run_processes
from tasks.runtime.validation import DataValidationError, InputError
from wander.core.logs import configure_logging
from wander.core.process_tree import WATCH_PID_ENV, Stopped, stop_on_signals, stop_when_gone

# Seconds a stopped stage gets to unwind before it leaves anyway (under the flow, the flow's shorter grace applies).
STOP_GRACE = 10.0


def stage_main(
    stage: str, run: Callable[..., dict], argv: Sequence[str] | None = None, runs_per_part: bool = False
) -> int:
    """Parse the stage's options, load its params, run it under MLflow; return the process exit status.

    A stage made of parts (grpo: one per curriculum stage) has `runs_per_part`: it is called with a function
    that opens a part's run by name (a sibling of the other stages' runs), and opens one for each part it runs."""
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
    rank = process_index()
    configure_logging(f"{stage} rank {rank}" if rank else stage, args.verbose)
    try:
        params = load_params(args.params, args.profile)
    except ParamsError as e:
        print(f"{stage}: error: {e}", file=sys.stderr)
        return 2
    if not is_worker() and (problems := launch_problems(params, stage)):
        print("\n".join(f"{stage}: error: {p}" for p in problems), file=sys.stderr)
        return 2
    start = time.monotonic()
    try:
        with stop_with_runner():  # the stage may start servers: a stop must unwind them
            if launched(params, stage) and not is_worker():
                code = run_processes(params, stage, sys.argv[1:] if argv is None else argv)
                if code:
                    print(
                        f"{stage}: a training process failed (launcher exit {code}; its error is above); the "
                        "others were stopped, and a rerun resumes from the last checkpoint",
                        file=sys.stderr,
                    )
                return code
            if args.no_mlflow or rank > 0:  # MLflow is the main process's (rank 0)
                part_run = _no_run
            else:
                from tasks.runtime.tracking import stage_run

                logged = {s: getattr(params, s).model_dump(mode="json") for s in READS[stage]}
                part_run = functools.partial(stage_run, params=logged)
            if runs_per_part:
                metrics = run(restrict(params, stage), part_run)
            else:
                with part_run(stage):
                    metrics = run(restrict(params, stage))
    except (DataValidationError, InputError, ParamsError, FileNotFoundError) as e:
        print(f"{stage}: error: {e}", file=sys.stderr)
        return 2
    except Stopped as e:
        seconds = time.monotonic() - start
        print(
            f"{stage}: {e} after {seconds:.1f} s; a rerun resumes its journaled or checkpointed work",
            file=sys.stderr,
        )
        return e.exit_code
    logging.getLogger(stage).info(
        "done in %.1f s: %s", time.monotonic() - start, json.dumps(headline(metrics), default=str)
    )
    return 0


@contextlib.contextmanager
def _no_run(name: str) -> Iterator[None]:
    """A part's run when MLflow is off: none."""
    yield


@contextlib.contextmanager
def stop_with_runner() -> Iterator[None]:
    """Within the block, stop signals end the stage cleanly; so does the end of DVC (when DVC runs it) or of the
    flow that ran it."""
    with stop_on_signals(STOP_GRACE):
        if "DVC_STAGE" in os.environ:  # DVC's stage command: nobody records the outputs once DVC is gone
            stop_when_gone(grace=STOP_GRACE)
        if os.environ.get(WATCH_PID_ENV, "").isdigit():
            stop_when_gone(int(os.environ[WATCH_PID_ENV]), grace=STOP_GRACE)
        yield


def headline(metrics: dict) -> dict:
    """The numbers of a metrics dict, nested ones as `a.b.c`, for a one-line summary."""
    flat = flatten(metrics, sep=".")
    return {k: v for k, v in flat.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
