"""Great Expectations helpers: a failed validation raises with a summary a person can act on."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tasks.runtime.validation import DataValidationError, gxe, validate


@pytest.fixture
def expectations() -> list:
    g = gxe()
    return [
        g.ExpectTableColumnsToMatchSet(column_set=["seed", "p", "stratum"], exact_match=True),
        g.ExpectColumnValuesToBeUnique(column="seed", description="one row per episode"),
        g.ExpectColumnValuesToBeBetween(column="p", min_value=0.0, max_value=1.0),
        g.ExpectColumnValuesToBeInSet(column="stratum", value_set=[0, 1]),
        g.ExpectTableRowCountToEqual(value=4),
    ]


def good() -> pd.DataFrame:
    return pd.DataFrame({"seed": [1, 2, 3, 4], "p": [0.1, 0.2, 0.7, 0.9], "stratum": [0, 0, 1, 1]})


def test_clean_frame_passes_with_a_json_report(expectations: list) -> None:
    report = validate(good(), expectations, "clean")
    assert report["success"] and report["failed"] == 0 and report["evaluated"] == 5 and report["rows"] == 4
    json.dumps(report)  # written to disk and MLflow as is
    assert validate(good(), expectations, "again")["success"]  # the same list serves twice


def test_corrupted_frame_is_rejected_with_column_and_values(expectations: list) -> None:
    frame = good()
    frame.loc[3, "seed"] = 1  # a repeated episode
    frame.loc[2, "p"] = 1.5  # out of range
    with pytest.raises(DataValidationError) as e:
        validate(frame, expectations, "specs train")
    message = str(e.value)
    assert message.startswith("validation of 'specs train' failed: 2 of 5 expectations on 4 rows")
    assert (
        "expect_column_values_to_be_unique on column 'seed' [one row per episode]: 2 of 4 rows unexpected, e.g. 1 (x2)"
        in message
    )
    assert (
        "expect_column_values_to_be_between on column 'p' (min_value=0.0, max_value=1.0): 1 of 4 rows unexpected, e.g. 1.5"
        in message
    )
    assert "stratum" not in message  # passing expectations are not listed
    assert "nothing was written" in message
    assert e.value.report["failed"] == 2


def test_schema_failures_say_what_was_observed(expectations: list) -> None:
    frame = good().drop(columns=["stratum"]).assign(extra=0)
    with pytest.raises(DataValidationError) as e:
        validate(frame.iloc[:3], expectations, "schema")
    message = str(e.value)
    assert "expect_table_columns_to_match_set" in message and "observed ['extra', 'p', 'seed']" in message
    assert "expect_table_row_count_to_equal (value=4): observed 3" in message
    assert "column 'stratum'" in message and 'could not be evaluated: Error: The column "stratum"' in message


def test_report_without_raising(expectations: list) -> None:
    report = validate(good().iloc[:2], expectations, "soft", raise_on_failure=False)
    assert not report["success"] and report["failed"] == 1
