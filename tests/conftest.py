"""Test-wide settings: offline and quiet, whatever the caller's shell has."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.runtime.stage_server import SERVER_ENV as STAGE_SERVER_ENV
from tests.end_to_end import END_TO_END
from wander.core.offline import stay_offline

stay_offline()

# Each xdist worker's share of the cores, for torch here and in every process a test starts (a stage's torch_threads
# 0 is torch's default, which reads OMP_NUM_THREADS): two workers of two-thread torch on two cores crawl, spinning for
# the core the other holds (the calculator's smoke pipeline: 134 s alone, 494 s beside the other worker's).
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    workers = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))


@pytest.fixture(scope="session", autouse=True)
def _stage_server(request, tmp_path_factory):
    """Every stage command a test starts runs in one warm stage server per worker (tasks/runtime/stage_server.py):
    a pipeline's 8 stages import torch, TRL, MLflow and GX once, not 8 times (a smoke `dvc repro`: 82 s, 30 s).
    Commands before it is ready, or whose environment it cannot match, run themselves; the tests of a stage's
    own process tree use `stages_in_own_processes`. A session of quick tests only starts none (its imports would
    take a core for ~15 s)."""
    # Opt-in until the suite passes served: at d0683b3 ten tests failed with it (test_dvc_deps reads the stage's
    # imports, which then include the server's client; test_launch; a killed rank) and pytest took 1,923 s, no faster.
    if os.environ.get("WANDER_TEST_STAGE_SERVER") != "1" or not any(
        item.get_closest_marker("slow") or item.get_closest_marker("end_to_end")
        for item in request.session.items
    ):
        yield
        return
    socket = tmp_path_factory.mktemp("stage-server") / "socket"
    server = subprocess.Popen(
        [sys.executable, "-m", "tasks.runtime.stage_server", str(socket)],
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    os.environ[STAGE_SERVER_ENV] = str(socket)
    yield
    os.environ.pop(STAGE_SERVER_ENV, None)
    server.terminate()
    server.wait(timeout=60)


@pytest.fixture
def stages_in_own_processes(monkeypatch):
    """Stage commands start as their own processes, as without a stage server: for the tests of their process tree."""
    monkeypatch.delenv(STAGE_SERVER_ENV, raising=False)


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


# `make test` runs the suite on two xdist workers (`-n 2 --dist loadscope --no-loadscope-reorder`). Work is handed
# out by group (`group` below: xdist's loadscope, with one change), a group's tests run in file order on one worker:
# - each test module is a group: a module-scoped fixture (a scratch project, a served env) is built once, and a
#   module whose tests build on the previous test's state (tests/flows/test_pipeline.py) keeps its order;
# - the change: every test that reads one env's smoke pipeline run (`smoke_pipeline`, tests/flows/conftest.py) is in
#   that env's group, so the pipeline runs once per session, not once per worker: its case of
#   tests/flows/test_pipeline_envs.py (`[<env>]`) and the env's own file, tests/flows/test_pipeline_<env>.py;
# - on the workers, groups with `slow` tests go first, most slow tests first: the long end-to-end runs start at once
#   instead of becoming the tail of the run. Without xdist the order is the files' own.
# (Not `--dist loadgroup` and xdist_group marks: xdist 3.8 renames node ids through an attribute pytest 9.2 no longer
# reads, so the marks group nothing.)
ENV_PIPELINES = "tests/flows/test_pipeline_"


def group(nodeid: str) -> str:
    """The xdist work unit of a test: its module, or `smoke-pipeline-<env>` for a test of that env's pipeline run."""
    module = nodeid.split("::")[0]
    if module == f"{ENV_PIPELINES}envs.py" and nodeid.endswith("]"):
        return f"smoke-pipeline-{nodeid[nodeid.rindex('[') + 1 : -1]}"
    if module.startswith(ENV_PIPELINES):
        return f"smoke-pipeline-{module.removeprefix(ENV_PIPELINES).removesuffix('.py')}"
    return module


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown without xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN201 (xdist is optional)
    """`--dist loadscope` with `group` as the scope."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group(nodeid)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.split("::")[0] in END_TO_END:
            item.add_marker(pytest.mark.end_to_end)
    if hasattr(config, "workerinput") and config.getvalue("dist") == "loadscope":
        slow: dict[str, int] = {}
        for item in items:
            slow[group(item.nodeid)] = slow.get(group(item.nodeid), 0) + (
                item.get_closest_marker("slow") is not None
            )
        items.sort(
            key=lambda item: -slow[group(item.nodeid)]
        )  # stable: file order within, and between equal groups
