"""Episode specs, the datasets the generate stage writes and synthesize plays: reading a split and the checks
every split passes (the env's columns and ranges, unique seeds, balanced difficulty strata, no seed in two splits).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from tasks.runtime.validation import gxe, validate
from wander.core.atomic_io import read_jsonl
from wander.core.pipeline_hooks import SpecChecks


def read_specs(specs_dir: str | Path, split: str) -> pd.DataFrame:
    """The episode specs of one split, as the generate stage wrote them."""
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
