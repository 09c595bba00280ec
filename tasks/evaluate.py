"""The evaluate stage: the env's evaluation suite for every policy, with metrics, tables, plots and a report.

The env decides the suite (`evaluation_suite`): a game's opponent matrix (tasks/report.py writes it) or rubric
means per difficulty stratum and split (tasks/rubric_report.py).

python -m tasks.evaluate --policy base=data/models/base --policy minimax --games 50 --out data/eval
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envs import Policy, load_environment
from tasks import report, rubric_report, tracking
from tasks.atomic import write_text
from tasks.curves import plot_curves, read_curves
from tasks.matrix import RATES, MatrixInterrupted, MatrixResult, run_matrix
from tasks.report import OUTPUTS
from tasks.sections import Env, EvaluateConfig, Params

# The module that writes a suite's outputs, by the env's `evaluation_suite`.
REPORTS = {"matrix": report, "rubric": rubric_report}


def headline_metrics(result: MatrixResult, baseline: str | None = None) -> dict:
    """The few numbers `dvc metrics` shows, as the suite's report computes them."""
    return REPORTS[result.suite].headline_metrics(result, baseline)


def write_report(result: MatrixResult, out_dir: str | Path, seed: int, baseline: str | None = None) -> dict:
    """Every output of the suite under `out_dir` (each file written atomically); their paths by kind."""
    suite = REPORTS[result.suite]
    paths = {kind: Path(out_dir) / name for kind, name in OUTPUTS.items()}
    write_text(paths["metrics"], json.dumps(suite.headline_metrics(result, baseline), indent=2) + "\n")
    write_text(paths["matrix"], json.dumps(suite.matrix_dict(result, seed), indent=2) + "\n")
    write_text(paths["csv"], report.csv_text(result.rows))
    metric, labels = suite.plot_labels(result)
    report.plot_heatmap(result, paths["heatmap"], metric, labels)
    report.plot_bars(result, paths["bars"], metric, labels)
    plot_curves(result.curves, paths["curve"])
    write_text(paths["report"], suite.markdown_report(result, seed, baseline))
    return paths


def text_table(result: MatrixResult) -> str:
    """The suite as a fixed-width table for a terminal."""
    return REPORTS[result.suite].text_table(result)


logger = logging.getLogger(__name__)


def run(params: Params, built: Mapping[str, Policy] | None = None) -> dict:
    """The stage: the matrix in the params' env, every output written under `evaluate.out_dir`; headline metrics."""
    return headline_metrics(evaluate(params.evaluate, built, params.env), params.evaluate.baseline)


def evaluate(
    config: EvaluateConfig,
    built: Mapping[str, Policy] | None = None,
    env: Env | Mapping[str, Any] | None = None,
) -> MatrixResult:
    """The matrix with its outputs written and, when an MLflow run is active, logged; `built`: ready policies.

    The output folder is checked before any game is played; when a policy row fails, the rows that finished are
    written there before the error goes on (`MatrixInterrupted` says so).
    """
    check_out_dir(config.out_dir)
    try:
        result = run_matrix(config, built, env)
    except MatrixInterrupted as stopped:
        partial = stopped.partial
        baseline = config.baseline if config.baseline in partial.policies else None
        write_report(partial, config.out_dir, config.seed, baseline)
        stopped.saved_to = str(config.out_dir)
        raise
    result.curves = read_curves(config.policies)
    paths = write_report(result, config.out_dir, config.seed, config.baseline)
    logger.info("wrote %s", ", ".join(str(p) for p in paths.values()))
    log_to_mlflow(result, config)
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


def mlflow_key(*parts: str) -> str:
    """An MLflow metric name from parts: characters MLflow refuses become '_'."""
    return "/".join(re.sub(r"[^\w\-. ]", "_", p) for p in parts)


def log_to_mlflow(result: MatrixResult, config: EvaluateConfig) -> bool:
    """Cell rates as metrics `eval/<policy>/<opponent>/<side>/<metric>` and every output as artifacts, if a run is active."""
    names = (*RATES, "format", "turns") if result.suite == "matrix" else rubric_report.metric_names(result)
    metrics = {
        mlflow_key("eval", r["policy"], r["opponent"], r["side"], metric): r[metric]
        for r in result.rows
        for metric in names
    }
    if not tracking.log_metrics(metrics):  # NaN (no moves to rate) is skipped there
        return False
    tracking.log_artifact(config.out_dir, artifact_path="evaluate")
    return True


def add_arguments(parser: argparse.ArgumentParser, rows: bool = True) -> None:
    """The matrix options, shared by `python -m tasks.evaluate`, `wander eval` and (without rows) `wander compare`."""
    defaults = {name: info.default for name, info in EvaluateConfig.model_fields.items()}
    if rows:
        parser.add_argument(
            "--policy",
            action="append",
            metavar="[NAME=]SPEC",
            help="a row: scripted player (tictactoe: random, minimax-0.5, expert; any env: expert-<slip>, its "
            "teacher), model folder, hub id or OpenAI-compatible URL; repeat for more rows (default: the env's "
            "reference players; tictactoe: random and minimax)",
        )
        parser.add_argument("--baseline", default=None, help="row the report compares the others against")
    parser.add_argument(
        "--env", default=Env.model_fields["name"].default, help="environment: registered name or module path"
    )
    parser.add_argument(
        "--opponents",
        default=None,
        help="comma-separated suite columns (tictactoe: random, minimax-<p>; others: stratum-<k>); "
        "default: the env's",
    )
    parser.add_argument("--games", type=int, default=defaults["games"], help="games per opponent and side")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default), > 0 = sampled")
    parser.add_argument(
        "--seed", type=int, default=defaults["seed"], help="seed of the frozen suite and policies"
    )
    parser.add_argument("--max-new-tokens", type=int, default=defaults["max_new_tokens"])
    parser.add_argument("--max-batch-size", type=int, default=None, help="most games per policy call")
    # tic-tac-toe's settings; unset, every env keeps its own defaults
    parser.add_argument("--rendering", choices=("board", "compact", "grid"), help="tictactoe board text")
    parser.add_argument("--history", choices=("current", "full"), help="tictactoe: what each turn reads")
    parser.add_argument("--max-turns", type=int, default=None, help="model turns per episode")
    parser.add_argument(
        "--api-model",
        default=defaults["api_model"],
        help="model name for OpenAI-compatible URLs (default: the one model the endpoint lists at /models)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def config_from_args(args: argparse.Namespace, out_dir: str) -> EvaluateConfig:
    """An EvaluateConfig from parsed `add_arguments` options."""
    return EvaluateConfig(
        policies=parse_policies(
            args.policy or list(load_environment(**env_from_args(args)).reference_policies)
        ),
        references=[],  # the rows are the --policy ones, or the references alone
        opponents=[o.strip() for o in args.opponents.split(",") if o.strip()] if args.opponents else None,
        games=args.games,
        seed=args.seed,
        temperature=args.temperature,
        max_new_tokens=args.max_new_tokens,
        max_batch_size=args.max_batch_size,
        api_model=args.api_model,
        out_dir=out_dir,
        baseline=getattr(args, "baseline", None),
        progress=not args.no_progress,
    )


def env_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The `load_environment` kwargs of parsed `add_arguments` options (the settings given)."""
    settings = {"rendering": args.rendering, "history": args.history, "max_turns": args.max_turns}
    return {"name": args.env, **{k: v for k, v in settings.items() if v is not None}}


def parse_policies(items: list[str]) -> dict[str, str]:
    """Row names for policy specs: `name=spec`, or the spec's own short name (a folder's last part)."""
    policies: dict[str, str] = {}
    for item in items:
        name, sep, spec = item.partition("=")
        # A URL's query string may hold '='; only a plain word before it is a row name.
        if not sep or not name or any(c in name for c in "/:"):
            spec = item
            name = item if item.startswith(("http://", "https://")) else Path(item.rstrip("/")).name or item
        if not spec:
            raise ValueError(f"policy {item!r} has an empty spec; write NAME=SPEC or just SPEC")
        if name in policies:
            raise ValueError(
                f"two policies are named {name!r}; give them distinct row names with NAME=SPEC, e.g. sft={spec}"
            )
        policies[name] = spec
    return policies


def main(argv: list[str] | None = None) -> int:
    """`python -m tasks.evaluate`: the pipeline stage, reading params.yaml's evaluate section."""
    from tasks.stage import stage_main

    return stage_main("evaluate", run, argv)


if __name__ == "__main__":
    sys.exit(main())
