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

from wander.core.evaluation_suite import EvaluationSuite
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
    """Stage names in dvc.yaml order (foreach stages expanded), which is their run order."""
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
    """`dvc repro --single-item <stage>`: DVC skips it when nothing it depends on changed."""
    start = time.monotonic()
    tail = stream(
        ["dvc", "repro", "--single-item", stage] + (["--force"] if force else []), root, parent_run_id
    )
    skipped = any("didn't change, skipping" in line for line in tail)
    return {"stage": stage, "seconds": time.monotonic() - start, "skipped": skipped}


@flow(name="wander-pipeline", log_prints=True)
def pipeline(
    root: str = str(PROJECT),
    stages: list[str] | None = None,
    force: bool = False,
    experiment: str | None = None,
    profile: str | None = None,
) -> list[dict]:
    """Run the DVC stages in order under one parent MLflow run; a failed stage fails the flow. With `profile`,
    params.yaml first takes the values of params.<profile>.yaml (`apply_profile`)."""
    from tasks.plumbing.tracking import pipeline_run

    if profile:
        print(apply_profile(Path(root), profile))
    check_params(Path(root))  # what a later stage would refuse stops the run before the first one
    names = stages or dvc_stages(Path(root))
    results = []
    logged = {"stages": ",".join(names), **({"profile": profile} if profile else {})}
    with pipeline_run("pipeline", logged, root=root, experiment=experiment) as run_id:
        for name in names:
            retried = run_stage.with_options(
                retries=RETRIES.get(name.split("@")[0], 0), retry_delay_seconds=5
            )
            results.append(retried(name, root, run_id, force))
    print(summary(Path(root), run_id))
    return results


def check_params(root: Path, profile: str | None = None) -> None:
    """Raise PreflightError when root's params.yaml (with `profile` merged) cannot run with its environment."""
    from tasks.plumbing.params import PARAMS_FILE, load_params
    from tasks.plumbing.preflight import preflight

    preflight(load_params(root / PARAMS_FILE, profile=profile))


def apply_profile(root: Path, profile: str) -> str:
    """Write params.<profile>.yaml's values into root's params.yaml (DVC reads only that file); say what changed."""
    from tasks.plumbing.params import PARAMS_FILE, write_params

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


def _held_to(worst: dict[str, dict]) -> str:
    """Each side's worst outcome, with the line when it is a loss."""
    return "; ".join(
        f"as {side} {w['outcome']}" + (f" ({', '.join(w['line'])})" if w["outcome"] == "loss" else "")
        for side, w in worst.items()
    )


def stage_lines(matrix: dict, rows: list[str], suite: EvaluationSuite) -> list[str]:
    """Each row's headline metric over every cell with its 95% interval, and a greedy row's exact results where the
    evaluation has them (the suite's chosen opponent / metric pairs): what each stage added."""
    metric = suite.metric(suite.headline)
    picks = suite.report.extremes
    lines = [f"each stage: {metric.label or metric.name} over every cell [95% interval]"]
    for row in rows:
        overall = matrix["policies"][row]["overall"]
        value, low, high = (overall.get(metric.name + k) for k in ("", "_ci_low", "_ci_high"))
        text = f"  {row:<14} " + (f"{value:.3f}" if value is not None else "-")
        text += f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
        exact = matrix.get("exact", {}).get(row)
        if exact:
            opponents = list(matrix["policies"][row]["opponents"])
            text += "   exact " + ", ".join(
                f"{opponents[i]} {name} {exact[opponents[i]][name]:.3f}" for i, name in picks
            )
        lines.append(text)
    return lines


def summary(root: Path, run_id: str | None = None) -> str:
    """What a person wants after a run: the candidate against the teacher per opponent, each stage's headline
    metric, its reply budgets, games per cell and the env's recipe as the stages read them, and where to look."""
    import yaml

    from tasks.plumbing.params import PARAMS_FILE, load_params
    from tasks.plumbing.preflight import budget_line
    from tasks.plumbing.recipe import recipe_line
    from wander import load_environment

    params = yaml.safe_load((root / "params.yaml").read_text())
    eval_dir = root / params["evaluate"]["out_dir"]
    matrix = json.loads((eval_dir / "matrix.json").read_text())
    metrics = matrix["policies"]
    candidate, teacher = params["register"]["candidate"], params["evaluate"].get("baseline") or "teacher"
    exact, worst = matrix.get("exact", {}).get(candidate, {}), matrix.get("worst_case", {}).get(candidate)
    register_file = root / params["layout"]["metrics"] / "register.json"
    registered = json.loads(register_file.read_text()) if register_file.exists() else {}
    if all(
        "win" in cell.get("both", {}) for cell in metrics[candidate]["opponents"].values()
    ):  # a game's matrix
        lines = [f"\n{candidate} vs {teacher}: win / draw / loss per opponent (both sides)"]
        for opponent in metrics[candidate]["opponents"]:
            cells = []
            for row in (candidate, teacher):
                m = metrics[row]["opponents"][opponent]["both"]
                cells.append(f"{m['win']:.2f} / {m['draw']:.2f} / {m['loss']:.2f}")
            e = exact.get(opponent)  # a greedy model's exact expectation: the numbers without sampling noise
            note = f"   {candidate} exact {e['win']:.3f} / {e['draw']:.3f} / {e['loss']:.3f}" if e else ""
            lines.append(f"  {opponent:<14} {cells[0]:<22} teacher {cells[1]}{note}")
    else:  # any other suite: its headline metric per split, as metrics.json holds it for these two rows
        headline = json.loads((eval_dir / "metrics.json").read_text())
        lines = [f"\n{candidate} vs {teacher}: headline metric (mean per episode)"]
        for row in (candidate, teacher):
            for metric, values in headline.get(row, {}).items():
                lines.append(f"  {row:<14} {metric}: " + ", ".join(f"{k} {v:.3f}" for k, v in values.items()))
    if worst:
        lines.append("against an opponent that knows its every move: " + _held_to(worst))
        if all("sound" in w for w in worst.values()):
            sound = {side: w["sound"] for side, w in worst.items()}
            lines.append(
                "  and one that also never gives up the game's value (a strong player): " + _held_to(sound)
            )
    checked = load_params(root / PARAMS_FILE)
    env = load_environment(**checked.env.kwargs())
    lineage = [r for r in dict.fromkeys([*params["evaluate"]["policies"], teacher]) if r in metrics]
    lines += stage_lines(matrix, lineage, env.evaluation_suite())
    if registered:
        state = "now champion" if registered["promoted"] else "champion unchanged"
        lines.append(f"registered version {registered['version']}: {state} ({registered['reason']})")
    # The reply budgets and games per cell, null ones resolved from the run's env as its stages resolved them.
    lines.append(budget_line(checked, env))
    lines.append(recipe_line(params))
    lines += [
        f"report: {eval_dir / 'report.md'}  plots: {eval_dir}/*.png",
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
