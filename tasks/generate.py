"""The generate stage: episode-spec datasets per split, stratified by difficulty, validated, then written.

python -m tasks.generate [--params params.yaml] [--profile smoke]

Output: `<output_dir>/{train,eval,test}.jsonl` (one spec per line) and `validation.json`, replaced as one folder
and only after every split passed its Great Expectations suite; a failure leaves the previous datasets untouched.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from pathlib import Path

import pandas as pd

from tasks.plumbing.sections import Params
from tasks.plumbing.tracking import log_artifact, write_stage_metrics
from tasks.plumbing.validation import gxe, validate
from wander import load_environment
from wander.core.atomic_io import atomic_dir, read_jsonl, write_json, write_jsonl
from wander.core.suite import SpecChecks

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


def read_specs(specs_dir: str | Path, split: str) -> pd.DataFrame:
    """The episode specs of one split, as written by this stage."""
    path = Path(specs_dir) / f"{split}.jsonl"
    if not path.exists():
        raise FileNotFoundError(
            f"no episode specs at {path}; run the generate stage first (dvc repro generate)"
        )
    return pd.DataFrame(read_jsonl(path))


def validate_specs(
    frames: dict[str, pd.DataFrame], checks: SpecChecks, sizes: dict[str, int] | None = None
) -> dict[str, dict]:
    """Validate each split (schema, ranges, balance, sizes) and seed uniqueness across splits; raise on failure."""
    reports = {}
    for split, frame in frames.items():
        expected = sizes.get(split) if sizes else None
        reports[split] = validate(
            with_stratum_counts(frame), spec_expectations(checks, len(frame), expected), f"specs {split}"
        )
    if len(frames) > 1:
        seeds = pd.concat(
            [f[["seed"]].assign(split=s) for s, f in frames.items() if "seed" in f], ignore_index=True
        )
        unique = gxe().ExpectColumnValuesToBeUnique(column="seed", description="no episode is in two splits")
        reports["all"] = validate(seeds, [unique], "specs across splits")
    return reports


def with_stratum_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy with `stratum_count` (rows in the row's stratum), so balance is a per-row check with clear values."""
    out = frame.copy()
    if "stratum" in out and len(out):
        out["stratum_count"] = out.groupby("stratum")["seed"].transform("size")
    return out


def spec_expectations(checks: SpecChecks, rows: int, expected_rows: int | None = None) -> list:
    """The suite of an episode-spec split: the env's columns, unique integer seeds, its ranges and value sets,
    strata balanced."""
    g = gxe()
    groups = checks.strata
    expectations = [
        g.ExpectTableColumnsToMatchSet(column_set=[*checks.columns, "stratum_count"], exact_match=True),
        g.ExpectColumnValuesToNotBeNull(column="seed"),
        g.ExpectColumnValuesToBeOfType(column="seed", type_="int64"),
        g.ExpectColumnValuesToBeUnique(column="seed"),
        g.ExpectColumnValuesToBeBetween(column="seed", min_value=0),
        *(
            g.ExpectColumnValuesToBeBetween(column=column, min_value=low, max_value=high)
            for column, (low, high) in checks.ranges.items()
        ),
        g.ExpectColumnValuesToBeInSet(column="stratum", value_set=list(range(groups))),
        *(
            g.ExpectColumnValuesToBeInSet(column=column, value_set=values)
            for column, values in checks.sets.items()
        ),
        # Round-robin strata: every stratum holds floor or ceil of rows / groups.
        g.ExpectColumnValuesToBeBetween(
            column="stratum_count",
            min_value=rows // groups,
            max_value=math.ceil(rows / groups),
            description="difficulty strata are balanced",
        ),
    ]
    if rows >= groups:
        expectations.append(
            g.ExpectColumnDistinctValuesToEqualSet(column="stratum", value_set=list(range(groups)))
        )
    if expected_rows is not None:
        expectations.append(g.ExpectTableRowCountToEqual(value=expected_rows))
    return expectations


if __name__ == "__main__":
    from tasks.plumbing.stage import stage_main

    sys.exit(stage_main("generate", run))
