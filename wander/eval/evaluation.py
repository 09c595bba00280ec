"""An evaluation from start to written report: the env's suite for every policy, then metrics, tables, plots.

The env decides the suite (`env.evaluation_suite()`, data): its kind picks the report that writes it, a game's
opponent matrix (`wander.eval.matrix_report`) or rubric means per difficulty stratum and split (`wander.eval.rubric_report`);
the plots are the suite's headline (`wander.eval.plots`). `wander eval` and the pipeline's evaluate stage both call
`evaluate`; the pipeline's run summary is the report's too (`run_summary`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from wander.core.atomic_io import write_text
from wander.core.environment import Environment
from wander.core.evaluation_suite import MATRIX, RUBRIC
from wander.core.policy import Policy
from wander.eval import matrix_report, plots, rubric_report
from wander.eval.config import EvaluateConfig
from wander.eval.curves import plot_curves, read_curves
from wander.eval.episodes_file import write_episodes
from wander.eval.journal import EvalJournal
from wander.eval.matrix import MatrixInterrupted, run_matrix
from wander.eval.matrix_result import MatrixResult
from wander.eval.outputs import OUTPUTS, csv_text

logger = logging.getLogger(__name__)

# The module that writes a suite's outputs, by the suite's kind.
REPORTS = {MATRIX: matrix_report, RUBRIC: rubric_report}


def headline_metrics(result: MatrixResult) -> dict:
    """The few numbers `dvc metrics` shows, as the suite's report computes them."""
    return REPORTS[result.suite.kind].headline_metrics(result)


def write_report(result: MatrixResult, out_dir: str | Path) -> dict:
    """Every output of the suite under `out_dir` (each file written atomically); their paths by kind."""
    suite = REPORTS[result.suite.kind]
    paths = {kind: Path(out_dir) / name for kind, name in OUTPUTS.items()}
    write_text(paths["metrics"], json.dumps(suite.headline_metrics(result), indent=2) + "\n")
    write_text(paths["matrix"], json.dumps(suite.matrix_dict(result), indent=2) + "\n")
    write_text(paths["csv"], csv_text(result.rows))
    plots.plot_heatmap(result, paths["heatmap"])
    plots.plot_bars(result, paths["bars"])
    plot_curves(result.curves, paths["curve"], result.suite.curve_series)
    write_text(paths["report"], suite.markdown_report(result))
    write_episodes(result, paths["episodes"])
    return paths


def run_summary(
    out_dir: str | Path, env: Environment, candidate: str, baseline: str | None, rows: Sequence[str]
) -> list[str]:
    """The evaluation's lines of a pipeline run's summary, written by the report of the env's suite kind from the
    outputs under `out_dir`: `candidate` against `baseline` (null: the report's first row), then each of `rows`
    (the models in training order) and the baseline by the headline metric."""
    return REPORTS[env.evaluation_suite().kind].run_summary(out_dir, env, candidate, baseline, rows)


def text_table(result: MatrixResult) -> str:
    """The suite as a fixed-width table for a terminal."""
    return REPORTS[result.suite.kind].text_table(result)


def evaluate(
    config: EvaluateConfig,
    built: Mapping[str, Policy] | None = None,
    env: Environment | Mapping[str, Any] | None = None,
    play_in: Callable[[Environment, int], Environment] | None = None,
    env_config: Mapping[str, Any] | None = None,
) -> MatrixResult:
    """The matrix with its outputs written under `config.out_dir`; `built`: ready policies by row name; `env` and
    `play_in` as `run_matrix` takes them; `env_config`: the env's `load_environment` kwargs when `env` is an
    environment object.

    The output folder is checked, and the rows' learning curves read, before any game is played. Each finished row
    sample is journaled under the output folder (wander/eval/journal.py) when the env's settings are known (`env`
    as kwargs, or `env_config`), so a killed evaluation rerun plays only what had not finished; the journal is
    removed once the report is written. When a policy row fails, the rows that finished are written there (without
    the curves) before the error goes on (`MatrixInterrupted` says so) and the journal is kept.
    """
    check_out_dir(config.out_dir)
    curves = read_curves(config.policies)  # a bad curve file fails before the games, not after
    resumable = env_config is not None or not isinstance(env, Environment)
    journal = EvalJournal(config.out_dir) if resumable else None
    try:
        result = run_matrix(config, built, env, play_in, journal=journal, env_config=env_config)
    except MatrixInterrupted as stopped:
        write_report(stopped.partial, config.out_dir)
        stopped.saved_to = str(config.out_dir)
        raise
    result.curves = curves
    paths = write_report(result, config.out_dir)
    if journal is not None:
        result.resumed = journal.resumed
        journal.remove()  # every unit is in the report now
        total = sum(len(episodes) for episodes in result.episodes.values())
        logger.info(
            "resumed %d episodes from %s, played %d", result.resumed, journal.path, total - result.resumed
        )
    logger.info("wrote %s", ", ".join(str(p) for p in paths.values()))
    return result


def check_out_dir(out_dir: str | Path) -> Path:
    """Make sure the report can be written to `out_dir` (created if missing) before any game is played."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(
            f"output folder {out} is an existing file, not a folder; name a folder (it is created if missing)"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot create the output folder {out}: {e.strerror or e}") from e
    taken = [name for name in OUTPUTS.values() if (out / name).is_dir()]
    if taken:
        raise ValueError(f"output folder {out} has folders where the report writes files: {', '.join(taken)}")
    if not os.access(out, os.W_OK | os.X_OK):
        raise ValueError(f"output folder {out} is not writable")
    return out
