"""Test-wide settings: offline and quiet, whatever the caller's shell has."""

import os
import sys

import pytest

for key, value in {
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DVC_NO_ANALYTICS": "1",
    "GX_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
}.items():
    os.environ.setdefault(key, value)


@pytest.fixture(autouse=True)
def _isolated_mlflow(monkeypatch):
    """No test leaks an MLflow tracking URI or an open run into the next one."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("WANDER_PARENT_RUN_ID", raising=False)
    yield
    mlflow = sys.modules.get("mlflow")
    if mlflow is not None:
        while mlflow.active_run() is not None:
            mlflow.end_run()
        mlflow.set_tracking_uri(None)


# `make test` runs the suite on two xdist workers (`-n 2 --dist loadgroup --no-loadscope-reorder`). Work is handed out
# by group, a group's tests run in file order on one worker:
# - each test module is a group: a module-scoped fixture (a scratch project, a served env) is built once, and a
#   module whose tests build on the previous test's state (tests/flows/test_pipeline.py) keeps its order;
# - every test that reads one env's smoke pipeline run (the `smoke_pipeline` fixture, tests/flows/conftest.py) is in
#   that env's group, so the pipeline runs once per session, not once per worker: the generic test's `pipeline_env`
#   case, and the env's own file, named test_pipeline_<env>.py;
# - on the workers, groups with `slow` tests go first, most slow tests first: the long end-to-end runs start at once
#   instead of becoming the tail of the run. Without xdist the order is the files' own.


def _group(item: pytest.Item) -> str:
    if "smoke_pipeline" in item.fixturenames:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "pipeline_env" in callspec.params:
            return f"smoke-pipeline-{callspec.params['pipeline_env']}"
        return f"smoke-pipeline-{item.path.stem.removeprefix('test_pipeline_')}"
    return item.nodeid.split("::")[0]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item)))
    if hasattr(config, "workerinput") and config.getvalue("loadgroup"):
        slow: dict[str, int] = {}
        for item in items:
            slow[_group(item)] = slow.get(_group(item), 0) + (item.get_closest_marker("slow") is not None)
        items.sort(key=lambda item: -slow[_group(item)])  # stable: file order within and between equal groups
