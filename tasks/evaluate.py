"""The evaluate stage: the env's evaluation suite for every policy (`wander.eval.evaluation`), its outputs under
`evaluate.out_dir`, its cell metrics and files logged to the stage's MLflow run.

python -m tasks.evaluate
"""

from __future__ import annotations

import functools
import logging
import re
import sys
from collections.abc import Mapping

from tasks.params.sections import Params
from tasks.runtime import tracking
from tasks.runtime.episodes import episode_env
from wander import Policy, load_environment
from wander.core.pipeline_hooks import games_per_cell, reply_budget
from wander.eval.config import EvaluateConfig
from wander.eval.evaluation import evaluate, headline_metrics
from wander.eval.matrix_result import MatrixResult
from wander.eval.pass_at_k import figure_names

logger = logging.getLogger(__name__)


def run(params: Params, built: Mapping[str, Policy] | None = None) -> dict:
    """The stage: the matrix in the params' env (played on `env.url` when set), every output written under
    `evaluate.out_dir` and logged to the active MLflow run; headline metrics."""
    local = load_environment(**params.env.kwargs())
    # A null reply budget or games per cell is the env's, resolved where the env is built and logged beside the
    # null the params say.
    resolved = {
        "max_new_tokens": reply_budget(local, params.evaluate.max_new_tokens),
        "games": games_per_cell(local, params.evaluate.games),
    }
    tracking.log_params({f"resolved/evaluate/{key}": value for key, value in resolved.items()})
    config = params.evaluate.model_copy(update=resolved)
    # The env's settings key the journal a killed stage resumes from (wander/eval/journal.py).
    play_in = functools.partial(episode_env, params.env)
    result = evaluate(config, built, local, play_in, env_config=params.env.kwargs())
    log_to_mlflow(result, config)
    return headline_metrics(result)


def mlflow_key(*parts: str) -> str:
    """An MLflow metric name from parts: characters MLflow refuses become '_'."""
    return "/".join(re.sub(r"[^\w\-. ]", "_", p) for p in parts)


def log_to_mlflow(result: MatrixResult, config: EvaluateConfig) -> bool:
    """Every metric of the suite per cell as `eval/<policy>/<opponent>/<side>/<metric>` (and, sampled, each pass@k
    figure) and every output as artifacts, if a run is active."""
    names = (*result.suite.names, *(figure_names(result.samples) if result.samples > 1 else ()))
    metrics = {
        mlflow_key("eval", r["policy"], r["opponent"], r["side"], metric): r[metric]
        for r in result.rows
        for metric in names
    }
    if not tracking.log_metrics(metrics):  # NaN (no moves to rate) is skipped there
        return False
    tracking.log_artifact(config.out_dir, artifact_path="evaluate")
    return True


def main(argv: list[str] | None = None) -> int:
    """`python -m tasks.evaluate`: the pipeline stage, reading params.yaml's evaluate section."""
    from tasks.runtime.stage import stage_main

    return stage_main("evaluate", run, argv)


if __name__ == "__main__":
    sys.exit(main())
