"""Great Expectations checks of the pipeline's data: a failed check stops the stage with a readable summary.

Stages build a list of expectations (`gxe().ExpectColumnValuesToBeUnique(column="seed")`, ...), validate a
pandas frame with `validate(frame, expectations, name)` *before* writing anything, and write their outputs
only when it passes. GX 1.x: an ephemeral context, a pandas datasource with one dataframe asset, an
ExpectationSuite and a ValidationDefinition run with `batch_parameters={"dataframe": df}`. GX is imported only
here and only when a stage validates (the import costs ~3 s).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

MAX_EXAMPLES = 5  # unexpected values shown per failed expectation
_SKIP_KWARGS = {"batch_id", "result_format", "catch_exceptions", "include_config", "meta", "rendered_content"}


class InputError(ValueError):
    """Input a stage refuses before doing any work; the message names the file, the row, the problem and the fix."""


class DataValidationError(ValueError):
    """Data that failed its expectations; the message says which, on which column, with example values."""

    def __init__(self, report: dict) -> None:
        self.report = report
        super().__init__(summarize(report))


def gxe() -> Any:
    """The `great_expectations.expectations` module (imported on first use)."""
    import great_expectations.expectations as expectations

    return expectations


def validate(frame: pd.DataFrame, expectations: list, name: str, *, raise_on_failure: bool = True) -> dict:
    """Run `expectations` on `frame`; return a JSON-ready report, or raise DataValidationError on failure."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    # GX sets some of its loggers to INFO itself; their chatter would drown the stage's own log lines.
    for logger_name in [n for n in logging.root.manager.loggerDict if n.startswith("great_expectations")]:
        logging.getLogger(logger_name).setLevel(logging.WARNING)

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)  # no tqdm bars in stage logs
    batch = (
        context.data_sources.add_pandas(name)
        .add_dataframe_asset(name)
        .add_batch_definition_whole_dataframe(name)
    )
    suite = context.suites.add(gx.ExpectationSuite(name=name))
    for expectation in expectations:
        # A copy: an expectation object belongs to one suite, and callers may reuse their list.
        suite.add_expectation(expectation.copy(update={"id": None}))
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=name, data=batch, suite=suite)
    )
    result = definition.run(batch_parameters={"dataframe": frame}, result_format="SUMMARY")
    report = _report(result, name, len(frame))
    if raise_on_failure and not report["success"]:
        raise DataValidationError(report)
    return report


def _report(result: Any, name: str, rows: int) -> dict:
    checks = []
    for r in result.results:
        config = r.expectation_config
        kwargs = {k: v for k, v in config.kwargs.items() if k not in _SKIP_KWARGS and v is not None}
        info = r.result or {}
        exception = _exception_message(r.exception_info or {})
        checks.append(
            {
                "expectation": config.type,
                "description": getattr(config, "description", None) or (config.meta or {}).get("description"),
                "kwargs": _jsonable(kwargs),
                "success": bool(r.success),
                "observed": _jsonable(info.get("observed_value")),
                "unexpected_count": info.get("unexpected_count"),
                "element_count": info.get("element_count"),
                "examples": _jsonable(info.get("partial_unexpected_counts") or []),
                "exception": exception,
            }
        )
    return {
        "name": name,
        "success": bool(result.success),
        "rows": rows,
        "evaluated": len(checks),
        "failed": sum(not c["success"] for c in checks),
        "checks": checks,
    }


def _exception_message(info: dict) -> str | None:
    # GX gives either one {raised_exception, exception_message} or one such dict per metric it computed.
    infos = [info] if "raised_exception" in info else [v for v in info.values() if isinstance(v, dict)]
    for item in infos:
        if item.get("raised_exception"):
            return str(item.get("exception_message") or "an exception")
    return None


def _jsonable(value: Any) -> Any:
    """Numpy scalars and other oddities as plain JSON values."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        try:
            return value.item()
        except (TypeError, ValueError):
            pass
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def summarize(report: dict) -> str:
    """The report as a few lines a person reads: which expectations failed, where, with example values."""
    lines = [
        f"validation of {report['name']!r} failed: {report['failed']} of {report['evaluated']} expectations "
        f"on {report['rows']} rows"
    ]
    for check in report["checks"]:
        if not check["success"]:
            lines.append("  - " + _describe(check))
    lines.append("nothing was written; fix the data or the params and rerun")
    return "\n".join(lines)


def _describe(check: dict) -> str:
    kwargs = dict(check["kwargs"])
    column = kwargs.pop("column", None)
    where = f" on column {column!r}" if column else ""
    args = ", ".join(f"{k}={_short(v)}" for k, v in kwargs.items())
    text = f"{check['expectation']}{where}" + (f" ({args})" if args else "")
    if check["description"]:
        text += f" [{check['description']}]"
    if check["exception"]:
        return f"{text}: could not be evaluated: {check['exception'].strip().splitlines()[-1]}"
    if check["unexpected_count"] is not None and check["element_count"] is not None:
        examples = ", ".join(
            f"{_short(e['value'])}" + (f" (x{e['count']})" if e["count"] > 1 else "")
            for e in check["examples"][:MAX_EXAMPLES]
        )
        text += f": {check['unexpected_count']} of {check['element_count']} rows unexpected"
        return text + (f", e.g. {examples}" if examples else "")
    return f"{text}: observed {_short(check['observed'])}"


def _short(value: Any, width: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."
