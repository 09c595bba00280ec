"""The register stage: the candidate becomes an MLflow model version tied to its lineage.

The `champion` alias moves to the new version only when the candidate passes every gate, each decided per
matrix column by 95% intervals on the same frozen suite:

1. no worse than its own start model (its parent in the lineage) in any column, nor item by item (the
   evaluation's paired difference on the headline metric, where the suite has one: rubric suites),
2. no worse than the baseline (the teacher) in any column, nor item by item,
3. better than the current champion in at least one column and worse in none.

The first version skips gate 3 (there is no champion yet), never gates 1 and 2. Where the env has exact results
(`ExactEvaluation`, tic-tac-toe) for the metric and both models decode greedily, gate 3 compares those: an exact
value has no sampling noise, so a champion that a few sampled games a cell could not tell apart is still beaten.
"""

from __future__ import annotations

import csv
import functools
import json
import logging
from pathlib import Path

from tasks.params.evaluation_sections import Register
from tasks.params.sections import Params
from tasks.params.shared_sections import Env
from tasks.params.yaml_file import read_yaml
from tasks.runtime.episodes import episode_env
from tasks.runtime.fingerprint import content_digest, digest
from tasks.runtime.tracking import log_params, write_metrics
from wander import Environment, load_environment
from wander.core.evaluation_suite import Metric
from wander.core.pipeline_hooks import reply_budget
from wander.eval.cells import pooled
from wander.eval.compare import WORSE, compare, compare_exact, conclusion, is_better
from wander.eval.config import EvaluateConfig
from wander.eval.matrix import run_matrix
from wander.eval.matrix_result import MatrixResult
from wander.eval.paired import verdict

log = logging.getLogger("register")
PIP_REQUIREMENTS = ["torch", "transformers", "mlflow"]
KEY_TAG = "wander.registration_key"  # `registration_key`: finds the version a stopped run already created


def dvc_hashes(lock_file: str | Path) -> dict[str, str]:
    """Output path -> md5 recorded by DVC (empty when the lock file is missing)."""
    path = Path(lock_file)
    if not path.exists():
        return {}
    lock = read_yaml(path)  # read as DVC reads it, as params.yaml is
    return {
        out["path"]: out.get("md5", "")
        for stage in (lock.get("stages") or {}).values()
        for out in stage.get("outs", [])
    }


def dvc_hash(hashes: dict[str, str], path: str | Path) -> str:
    """The md5 DVC recorded for `path`, or `<md5>:<path inside>` of the DVC output folder holding it (a curriculum
    stage's model in `data/models/grpo`); "untracked" when no output holds it."""
    path = Path(path)
    if str(path) in hashes:
        return hashes[str(path)]
    for out, md5 in hashes.items():
        if path.is_relative_to(out):
            return f"{md5}:{path.relative_to(out).as_posix()}"
    return "untracked"


def matrix_rows(eval_dir: str | Path, policy: str) -> list[dict]:
    """The evaluate stage's tidy rows of one policy, with numeric fields as numbers."""
    path = Path(eval_dir) / "matrix.csv"
    with path.open() as f:
        rows = [r for r in csv.DictReader(f) if r["policy"] == policy]
    if not rows:
        raise ValueError(f"{path} has no rows for policy {policy!r}; is register.candidate an evaluate row?")
    for row in rows:
        for key, value in row.items():
            try:
                row[key] = float(value) if "." in value or "e" in value else int(value)
            except (TypeError, ValueError):
                pass
    return rows


def champion_matrix(
    client, config: Register, candidate_rows: list[dict], suite: dict, section: Env, env: Environment
) -> MatrixResult | None:
    """The current champion replayed on the candidate's frozen suite (the evaluate stage's matrix.json, `suite`)
    in `env` (built from the params' env `section`, played where it says; exact results too where the env has
    them), or None without a champion."""
    import mlflow
    import mlflow.pyfunc

    try:
        version = client.get_model_version_by_alias(config.model_name, config.alias)
    except mlflow.exceptions.MlflowException:
        return None
    policy = (
        mlflow.pyfunc.load_model(f"models:/{config.model_name}@{config.alias}").unwrap_python_model().policy
    )
    opponents = list(dict.fromkeys(r["opponent"] for r in candidate_rows))
    eval_config = EvaluateConfig(
        policies={"champion": "registry"},
        references=[],
        opponents=opponents,
        games=int(suite["games_per_cell"]),
        seed=int(suite["seed"]),
        max_new_tokens=config.max_new_tokens,
        baseline=None,
        progress=False,
    )
    log.info("replaying champion v%s on the candidate's suite", version.version)
    policy.max_new_tokens = config.max_new_tokens
    return run_matrix(eval_config, {"champion": policy}, env, functools.partial(episode_env, section))


def decide(
    champion: list[dict] | None,
    candidate: list[dict],
    metric: Metric,
    name: str,
    references: dict[str, list[dict]] | None = None,
    exact: list[dict] | None = None,
    paired: dict[str, dict] | None = None,
) -> tuple[bool, str]:
    """Promote when no reference (start model, baseline) is better in any column, nor item by item (`paired`: the
    evaluation's paired differences "<candidate> - <reference>" on this metric, where it has them), and the champion
    is beaten, on one metric of the env's suite (its direction says which way is better); `exact`
    (`compare_exact`: both greedy, the env's exact results) judges the champion instead of the sampled rows."""
    for reference, rows in (references or {}).items():
        found = (paired or {}).get(f"{name} - {reference}")
        if found and verdict(found) == ("better" if metric.lower_is_better else "worse"):
            return False, (
                f"{name} is worse than {reference} on {metric.name} item by item: {found['mean']:+.3f} "
                f"[{found['ci_low']:+.3f}, {found['ci_high']:+.3f}] on the same {found['n']} items "
                f"({found['better']} better, {found['worse']} worse)"
            )
        *columns, pooled = compare(rows, candidate, metric)  # compare's last entry pools every column
        worse = [f"{c['opponent']} ({c['side']})" for c in columns if c["verdict"] == WORSE]
        if worse or pooled["verdict"] == WORSE:
            return False, (
                f"{name} is worse than {reference} on {metric.name} in {', '.join(worse) or 'all columns pooled'}: "
                f"{pooled['b']:.3f} against {pooled['a']:.3f} over all columns ({pooled['b'] - pooled['a']:+.3f})"
            )
    if champion is None:
        return True, "first registered version" + (
            f", no worse than {', '.join(references)}" if references else ""
        )
    found = exact or compare(champion, candidate, metric)
    return is_better(found), conclusion(found, "champion", name, exact=exact is not None)


def registration_key(config: Register, checkpoint: Path, eval_dir: Path) -> str:
    """What makes two registrations the same (16 hex digits): the register settings (model name, gates), the
    candidate's files and the evaluation that judged it."""
    return digest([config, content_digest(checkpoint), content_digest(eval_dir / "matrix.json")])


def registered_version(client, model_name: str, key: str):
    """The version of `model_name` registered under `key` (a stopped earlier run of this very registration), or None."""
    import mlflow

    try:
        versions = client.search_model_versions(f"name='{model_name}'")
    except mlflow.exceptions.MlflowException:
        return None
    # Filtered here, not in the search string: tag filters differ between MLflow's stores and servers.
    found = [v for v in versions if (v.tags or {}).get(KEY_TAG) == key]
    return min(found, key=lambda v: int(v.version)) if found else None


def point_alias(client, config: Register, version: str) -> None:
    """Move the alias to `version` unless it already points there or to a later version (promoted since)."""
    import mlflow

    try:
        current = int(client.get_model_version_by_alias(config.model_name, config.alias).version)
    except mlflow.exceptions.MlflowException:
        current = 0
    if current < int(version):
        client.set_registered_model_alias(config.model_name, config.alias, version)


def run(params: Params) -> dict:
    """Log the candidate as a model, register a version with lineage tags, move the alias if better.

    Everything is gathered and decided before the one write that creates the version (with all its tags, one
    transaction), so a failure registers nothing; a rerun after a stop at any point finds that version by its
    registration key and only finishes the alias: one version, its alias and tags consistent."""
    config = params.register.model_copy(update={"model_name": params.registered_model_name()})
    import mlflow
    import mlflow.pyfunc

    from tasks.runtime import registered_model

    if config.candidate not in config.lineage:
        raise ValueError(
            f"register.candidate {config.candidate!r} is not in register.lineage {list(config.lineage)}"
        )
    checkpoint = Path(config.lineage[config.candidate])
    if not checkpoint.is_dir():
        raise FileNotFoundError(
            f"candidate checkpoint {checkpoint} does not exist; run the training stages first"
        )
    eval_dir = Path(config.eval_dir)
    rows = matrix_rows(eval_dir, config.candidate)
    names = list(config.lineage)
    parent = names[names.index(config.candidate) - 1] if names.index(config.candidate) else None
    references = {r: matrix_rows(eval_dir, r) for r in (parent, config.baseline) if r}
    env = load_environment(**params.env.kwargs())
    # A null reply budget is the env's, resolved where the env is built and logged beside the null the params say.
    config = config.model_copy(update={"max_new_tokens": reply_budget(env, config.max_new_tokens)})
    log_params({"resolved/register/max_new_tokens": config.max_new_tokens})
    suite = env.evaluation_suite()
    metric = suite.comparable(config.metric or suite.headline)
    overall = pooled(rows, metric)["mean"]
    client = mlflow.MlflowClient()
    key = registration_key(config, checkpoint, eval_dir)
    version = registered_version(client, config.model_name, key)
    if version is None:
        hashes = dvc_hashes(config.lock_file)
        matrix = json.loads((eval_dir / "matrix.json").read_text())
        champion = champion_matrix(client, config, rows, matrix, params.env, env)  # the candidate's env
        exact = None
        candidate_exact = matrix.get("exact", {}).get(config.candidate)
        if champion is not None and candidate_exact and "champion" in champion.exact:
            # Both greedy: their exact results settle what a few sampled games a cell cannot tell.
            exact = compare_exact(champion.exact["champion"], candidate_exact, metric)
        # Paired differences are the headline's (evaluate's); a gate on another metric has none.
        paired = matrix.get("paired") if metric.name == suite.headline else None
        promoted, reason = decide(
            champion.rows if champion else None, rows, metric, config.candidate, references, exact, paired
        )
        tags = {
            KEY_TAG: key,
            "wander.checkpoint": str(checkpoint),
            "wander.dvc_md5": dvc_hash(hashes, checkpoint),
            "wander.parent": parent or "none",
            "wander.parent_md5": dvc_hash(hashes, config.lineage[parent]) if parent else "none",
            **{f"wander.dataset.{d}": dvc_hash(hashes, d) for d in config.datasets},
            f"eval.{metric.name}": f"{overall:.4f}",
            "wander.promoted": str(promoted).lower(),
            "wander.promotion_reason": reason,
        }
        info = mlflow.pyfunc.log_model(
            name="model",
            python_model=registered_model.__file__,
            artifacts={"checkpoint": str(checkpoint)},
            pip_requirements=PIP_REQUIREMENTS,
        )
        version = mlflow.register_model(info.model_uri, config.model_name, tags=tags)
    else:
        log.info("version %s already registers this candidate and evaluation: finishing it", version.version)
        promoted = version.tags["wander.promoted"] == "true"
        reason = version.tags["wander.promotion_reason"]
    if promoted:
        point_alias(client, config, version.version)
    log.info("version %s %s: %s", version.version, "promoted" if promoted else "not promoted", reason)
    metrics = {
        "version": int(version.version),
        "promoted": promoted,
        "reason": reason,
        f"candidate_{metric.name}": overall,
    }
    write_metrics(Path(params.layout.metrics) / "register.json", metrics)
    return metrics


if __name__ == "__main__":
    import sys

    from tasks.runtime.stage import stage_main

    sys.exit(stage_main("register", run))
