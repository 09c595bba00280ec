"""The pipeline flow: one parent MLflow run, each DVC stage a Prefect task.

DVC owns the DAG and the cache (`dvc repro --single-item <stage>` reruns a stage only when its
deps or params changed); Prefect adds runs, retries, logs and schedules; MLflow nests every
stage's run under this flow's parent run through WANDER_PARENT_RUN_ID.

`profile` (`make run PROFILE=llm`, `python -m flows.pipeline --profile llm`) first writes `params.<profile>.yaml`'s
values into params.yaml, the one params file DVC reads, as `dvc exp run -S` would: comments kept, the changed keys
printed, `git diff params.yaml` shows them and `git checkout params.yaml` undoes them.

Stop means stop (docs/pipeline.md, "Stopping a run"): each stage runs in a process group of its own; SIGTERM, Ctrl-C
or a Prefect cancellation stops that group (SIGTERM, then SIGKILL after `STOP_GRACE` seconds), the runs are marked
Crashed/Cancelled (Prefect) and KILLED (MLflow), and the process exits 128 + the signal within `EXIT_SECONDS` more,
whether or not the Prefect API it reports to is still there. A stage also stops itself if this process is killed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO

from prefect import flow, get_run_logger, task
from prefect.exceptions import TerminationSignal

from flows.service_check import refuse_when_down
from wander.core.process_tree import WATCH_PID_ENV, exit_after, start_group, stop_group, stop_on_signals

# Stages that talk to the outside world (a teacher API) get retries; the rest fail fast.
RETRIES = {"synthesize": 2}
PROJECT = Path(__file__).resolve().parent.parent
# A stopped stage gets STOP_GRACE seconds to unwind (stop its servers, end its MLflow run) before SIGKILL; then
# the flow gets EXIT_SECONDS more to report the end before it leaves anyway.
STOP_GRACE = 8.0
EXIT_SECONDS = 5.0


class StageFailed(RuntimeError):
    """A DVC stage exited non-zero; the message carries the end of its output."""


def dvc_stages(root: Path) -> list[str]:
    """Stage names in dvc.yaml order, which is their run order."""
    out = subprocess.run(
        ["dvc", "stage", "list", "--name-only"],
        cwd=root,
        env=stage_env(None),
        capture_output=True,
        text=True,
        check=True,
    )
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def stage_env(parent_run_id: str | None) -> dict[str, str]:
    """The stage process environment: the project's Python first on PATH, the parent run id, this process's id
    (the stage stops if it ends)."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env[WATCH_PID_ENV] = str(os.getpid())
    if parent_run_id:
        env["WANDER_PARENT_RUN_ID"] = parent_run_id
    return env


def stream(cmd: list[str], root: str, parent_run_id: str | None) -> list[str]:
    """Run a command, streaming its output into the Prefect log; raise StageFailed with its tail on failure."""
    logger = get_run_logger()
    tail: deque[str] = deque(maxlen=40)
    proc = start_group(
        cmd,
        cwd=root,
        env=stage_env(parent_run_id),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    stopping = False
    try:
        for line in proc.stdout:
            tail.append(line.rstrip())
            logger.info(tail[-1])
        proc.wait()
    except BaseException as stop:
        # A signal or a cancellation (no Exception): the process ends within seconds, whatever else happens.
        if stopping := not isinstance(stop, Exception):
            logger.error("%s: stopping the stage's processes", type(stop).__name__)
            exit_after(STOP_GRACE + EXIT_SECONDS, stop_exit_code(stop))
        raise
    finally:
        stop_group(proc, STOP_GRACE)  # after a clean exit too: nothing the stage started outlives it
        if stopping:  # the stage is gone: what is left is reporting the end, which must not take long
            exit_after(EXIT_SECONDS)
        for line in _left_in_pipe(proc.stdout):  # a stopped stage's last words: what it kept, how to resume
            tail.append(line)
            logger.info(line)
        proc.stdout.close()
    if proc.returncode != 0:
        raise StageFailed(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n" + "\n".join(tail))
    return list(tail)


def _left_in_pipe(pipe: IO[str]) -> list[str]:
    """The lines still unread in `pipe`, without waiting for more (its writers are gone or are strangers)."""
    os.set_blocking(pipe.fileno(), False)
    data = b""
    with contextlib.suppress(BlockingIOError, OSError, ValueError):
        while chunk := os.read(pipe.fileno(), 65536):
            data += chunk
    return data.decode(errors="replace").splitlines()


@task(name="dvc-stage", task_run_name="{stage}")
def run_stage(stage: str, root: str, parent_run_id: str | None, force: bool = False) -> dict:
    """`dvc repro --single-item <stage>` (flows/dvc_stage.py): DVC skips it when nothing it depends on changed."""
    start = time.monotonic()
    skipped = reproduce(stage, root, parent_run_id, force)
    return {"stage": stage, "seconds": time.monotonic() - start, "skipped": skipped}


def reproduce(stage: str, root: str, parent_run_id: str | None, force: bool = False) -> bool:
    """Stream `python -m flows.dvc_stage STAGE` in `root`; whether DVC skipped it (nothing it depends on changed)."""
    tail = stream(
        [sys.executable, "-m", "flows.dvc_stage", stage, *(["--force"] if force else [])], root, parent_run_id
    )
    return any("didn't change, skipping" in line for line in tail)


# The flow's own lines go through its run logger (the terminal and Prefect's UI); not log_prints: a library that
# captures stdout for itself (dill's `dis` of a function, when datasets hashes an arrow table) would print into the log.
@flow(name="wander-pipeline")
def pipeline(
    root: str = str(PROJECT),
    stages: list[str] | None = None,
    force: bool = False,
    experiment: str | None = None,
    profile: str | None = None,
) -> list[dict]:
    """Run the DVC stages in order under one parent MLflow run; a failed stage fails the flow. With `profile`,
    params.yaml first takes the values of params.<profile>.yaml (`apply_profile`)."""
    from tasks.runtime.tracking import pipeline_run

    if profile:
        get_run_logger().info(apply_profile(Path(root), profile))
    check_params(Path(root))  # what a later stage would refuse stops the run before the first one
    names = stages or dvc_stages(Path(root))
    results = []
    logged = {"stages": ",".join(names), **({"profile": profile} if profile else {})}
    with pipeline_run("pipeline", logged, root=root, experiment=experiment) as run_id:
        for name in names:
            retried = run_stage.with_options(retries=RETRIES.get(name, 0), retry_delay_seconds=5)
            results.append(retried(name, root, run_id, force))
    get_run_logger().info(summary(Path(root), run_id))
    return results


def check_params(root: Path, profile: str | None = None) -> None:
    """Raise PreflightError when root's params.yaml (with `profile` merged) cannot run with its environment."""
    from tasks.params.load import PARAMS_FILE, load_params
    from tasks.params.preflight import preflight

    preflight(load_params(root / PARAMS_FILE, profile=profile))


def apply_profile(root: Path, profile: str) -> str:
    """Write params.<profile>.yaml's values into root's params.yaml (DVC reads only that file); say what changed."""
    from tasks.params.load import PARAMS_FILE, write_params

    path = root / PARAMS_FILE
    changed = write_params(path, profile, path)
    if not changed:
        return f"params.yaml already holds profile {profile!r} (params.{profile}.yaml): nothing changed"
    shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
    return (
        f"params.yaml now holds profile {profile!r}: {len(changed)} values from params.{profile}.yaml ({shown}); "
        "DVC reruns the stages that read them. `git diff params.yaml` shows the change, "
        "`git checkout params.yaml` undoes it."
    )


def summary(root: Path, run_id: str | None = None) -> str:
    """What a person wants after a run: the evaluation's lines as the suite's report writes them (the candidate
    against the baseline, each stage's headline metric), the registration, the reply budgets, games per cell, each
    stage's precision and the env's recipe as the stages read them, and where to look."""
    from tasks.params.load import PARAMS_FILE, load_params, read_params
    from tasks.params.preflight import budget_line
    from tasks.params.recipe import recipe_line
    from wander import load_environment
    from wander.eval.evaluation import run_summary
    from wander.eval.outputs import OUTPUTS
    from wander.policies.precision import precision_line

    given = read_params(root / PARAMS_FILE)  # as params.yaml sets it: the recipe line marks what it sets
    params = load_params(root / PARAMS_FILE, params=given)
    env = load_environment(**params.env.kwargs())
    eval_dir = root / params.evaluate.out_dir
    lines = [""]
    lines += run_summary(
        eval_dir, env, params.register.candidate, params.evaluate.baseline, list(params.evaluate.policies)
    )
    register_file = root / params.layout.metrics / "register.json"
    if register_file.exists():
        registered = json.loads(register_file.read_text())
        state = "now champion" if registered["promoted"] else "champion unchanged"
        lines.append(f"registered version {registered['version']}: {state} ({registered['reason']})")
    # The reply budgets and games per cell, null ones resolved from the run's env as its stages resolved them.
    lines.append(budget_line(params, env))
    lines.append(
        precision_line({"sft": params.sft.bf16, "grpo": params.grpo.bf16, "evaluate": params.evaluate.bf16})
    )
    lines.append(recipe_line(given))
    lines += [
        f"report: {eval_dir / OUTPUTS['report']}  plots: {eval_dir}/*.png",
        f"MLflow: make ui (run {run_id})" if run_id else "MLflow: make ui",
    ]
    return "\n".join(lines)


def stop_exit_code(stop: BaseException) -> int:
    """128 + the signal a stop came from (SIGINT for a plain KeyboardInterrupt)."""
    signum = getattr(stop, "signum", None) or getattr(stop, "signal", None) or signal.SIGINT
    return 128 + int(signum)


def main(argv: list[str] | None = None) -> int:
    """`python -m flows.pipeline [--profile NAME]`: the whole pipeline on params.yaml (with the profile written in)."""
    parser = argparse.ArgumentParser(prog="python -m flows.pipeline", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--profile",
        help="write params.<profile>.yaml's values into params.yaml first (e.g. llm: the chat model)",
    )
    args = parser.parse_args(argv)
    try:  # before Prefect starts: a params problem is one message, not a failed flow run
        check_params(PROJECT, args.profile)
    except ValueError as exc:  # PreflightError, or a params file the model refuses
        print(f"python -m flows.pipeline: {exc}", file=sys.stderr)
        return 2
    if refuse_when_down(
        "python -m flows.pipeline", PROJECT
    ):  # a team service down or refusing: one line each
        return 2
    return stoppable(lambda: pipeline(profile=args.profile))


def stoppable(run: Callable[[], object]) -> int:
    """Call a flow from the command line: 0 when it finishes, 128 + the signal when SIGTERM or SIGINT stopped it."""
    # Prefect turns SIGTERM into its TerminationSignal while a flow runs, then sends it again to this handler.
    try:
        with stop_on_signals(STOP_GRACE + EXIT_SECONDS):
            run()
    except (KeyboardInterrupt, TerminationSignal) as stop:
        code = stop_exit_code(stop)
        print(
            f"stopped by {signal.Signals(code - 128).name}: finished stages are kept, and the next run resumes "
            "the rest (docs/pipeline.md, Stopping a run)",
            file=sys.stderr,
        )
        return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
