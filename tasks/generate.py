"""The generate stage: episode-spec datasets per split, stratified by difficulty, validated, then written.

python -m tasks.generate [--params params.yaml] [--profile smoke]

Output: `<output_dir>/{train,eval,test}.jsonl` (one spec per line) and `validation.json`, replaced as one folder
and only after every split passed its Great Expectations suite; a failure leaves the previous datasets untouched.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import pandas as pd

from tasks.params.sections import Params
from tasks.runtime.episode_specs import validate_specs
from tasks.runtime.tracking import log_artifact, write_stage_metrics
from wander import load_environment
from wander.core.atomic_io import atomic_dir, write_json, write_jsonl
from wander.core.pipeline_hooks import SpecChecks

logger = logging.getLogger(__name__)
SPLITS = ("train", "eval", "test")


def run(params: Params) -> dict:
    """Build every split, validate all of them, then write them as one folder; return and write the metrics
    (headline: episodes and seconds; the per-split breakdown goes to the details file)."""
    config, output_dir = params.generate, params.layout.datasets
    start = time.monotonic()
    env = load_environment(**params.env.kwargs(), **config.env_settings())
    frames = {split: pd.DataFrame(env.get_dataset(split).to_list()) for split in SPLITS}
    sizes = {split: getattr(config, f"num_{split}") for split in SPLITS}
    checks = env.spec_checks()
    reports = validate_specs(frames, checks, sizes)
    with atomic_dir(output_dir) as tmp:
        for split, frame in frames.items():
            write_jsonl(tmp / f"{split}.jsonl", frame.to_dict("records"))
        write_json(tmp / "validation.json", reports)
    metrics = {
        "episodes": sum(len(f) for f in frames.values()),
        "splits": {split: split_metrics(frame, checks) for split, frame in frames.items()},
        "seconds": round(time.monotonic() - start, 2),
    }
    headline = {k: metrics[k] for k in ("episodes", "seconds")}  # split sizes are params, shown already
    write_stage_metrics(params.layout, "generate", headline, metrics)
    log_artifact(Path(output_dir) / "validation.json", "validation")
    logger.info("wrote %s: %s", output_dir, {s: len(f) for s, f in frames.items()})
    return metrics


def split_metrics(frame: pd.DataFrame, checks: SpecChecks) -> dict:
    """Rows, rows per stratum and the means the env reports of one split (tic-tac-toe: opponent skill)."""
    return {
        "episodes": len(frame),
        "per_stratum": {str(k): int(v) for k, v in frame["stratum"].value_counts().sort_index().items()},
        **{name: round(float(frame[column].mean()), 6) for name, column in checks.means.items()},
    }


if __name__ == "__main__":
    from tasks.runtime.stage import stage_main

    sys.exit(stage_main("generate", run))
