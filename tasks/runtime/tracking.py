"""MLflow tracking of stages: one nested run per stage under the pipeline's parent run, plus DVC metrics files.

The store is the project's own: `sqlite:///<root>/mlflow/mlflow.db` with artifacts under `<root>/mlflow/artifacts`
(`MLFLOW_TRACKING_URI` overrides it, e.g. an `mlflow server`). A stage run nests under the run whose id is in
`WANDER_PARENT_RUN_ID`; without it, the stage logs a standalone run. The parent is deliberately not passed as
`MLFLOW_RUN_ID`: MLflow (and transformers' callback) would then resume the parent instead of nesting under it.
Stage code calls `log_metrics`/`log_artifact`, which do nothing when no run is active (tests, ad-hoc calls).

A stop signal never cuts a store write in half: once `setup` ran, every SQLAlchemy session transaction of the process
(MLflow's store, whoever writes: a stage, transformers' MLflow callback, the registry client) is a
`defer_stops` block, so a stop waits for its commit; cut in half, it kept SQLite's lock and recording the run KILLED
waited 20 s for it. Artifact copies are no transaction: a stop there is raised at once and unwinds.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasks.params.nested_keys import flatten
from wander.core.atomic_io import write_json
from wander.core.logs import redact_url
from wander.core.process_tree import alive, defer_stops

if TYPE_CHECKING:
    from tasks.params.shared_sections import Layout

PARENT_RUN_ENV = "WANDER_PARENT_RUN_ID"
EXPERIMENT_ENV = "WANDER_EXPERIMENT"
DEFAULT_EXPERIMENT = "wander"
STORE_DIR = "mlflow"
_in_transaction: dict[int, contextlib.AbstractContextManager] = {}  # id(session transaction) -> its deferral


def tracking_uri(root: str | os.PathLike = ".") -> str:
    """The tracking URI: `MLFLOW_TRACKING_URI` if set, else the project's sqlite store under `<root>/mlflow`."""
    return os.environ.get("MLFLOW_TRACKING_URI") or project_store(root)


def project_store(root: str | os.PathLike = ".") -> str:
    """The project's own tracking store: sqlite under `<root>/mlflow`."""
    return f"sqlite:///{(Path(root) / STORE_DIR / 'mlflow.db').resolve()}"


def artifact_root(root: str | os.PathLike = ".") -> Path:
    """Where the project's store keeps artifacts."""
    return (Path(root) / STORE_DIR / "artifacts").resolve()


def setup(root: str | os.PathLike = ".", experiment: str | None = None) -> str:
    """Point MLflow at the project's store and return the id of the experiment (created on first use)."""
    import mlflow

    defer_stops_in_transactions()
    (Path(root) / STORE_DIR).mkdir(parents=True, exist_ok=True)
    # MLflow also exports this as MLFLOW_TRACKING_URI: stage subprocesses then log to their parent's store.
    mlflow.set_tracking_uri(tracking_uri(root))
    name = experiment or os.environ.get(EXPERIMENT_ENV) or DEFAULT_EXPERIMENT
    # The first use creates the store's schema (alembic, on a connection outside any session): one transaction too.
    with defer_stops():
        found = mlflow.MlflowClient().get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        if mlflow.get_tracking_uri() != project_store(root):  # a server's (or a user's store's) own location
            return mlflow.create_experiment(name)
        # The project's store: our own artifact location; the default (./mlruns) would land wherever it runs.
        return mlflow.create_experiment(name, artifact_location=artifact_root(root).as_uri())


def defer_stops_in_transactions() -> None:
    """Make every SQLAlchemy session transaction of this process a `defer_stops` block, from its first statement to
    its end (commit, rollback or close); idempotent."""
    from sqlalchemy import event
    from sqlalchemy.orm import Session

    if not event.contains(Session, "after_begin", _transaction_began):
        event.listen(Session, "after_begin", _transaction_began)
        event.listen(Session, "after_transaction_end", _transaction_ended)


def _transaction_began(session: Any, transaction: Any, connection: Any) -> None:
    if id(transaction) not in _in_transaction:
        deferral = defer_stops()
        deferral.__enter__()
        _in_transaction[id(transaction)] = deferral


def _transaction_ended(session: Any, transaction: Any) -> None:
    # After the commit or rollback itself: a stop waiting for it is redelivered once the lock is released.
    deferral = _in_transaction.pop(id(transaction), None)
    if deferral is not None:
        deferral.__exit__(None, None, None)


def _owner() -> dict[str, str]:
    """Tags naming the process that opens a run, so a later start can tell a run whose process died."""
    return {"wander.host": socket.gethostname(), "wander.pid": str(os.getpid())}


def close_dead_runs(experiment_id: str) -> list[str]:
    """Mark KILLED every RUNNING run of the experiment whose process (on this host) is gone; return their ids.

    A stage killed with `kill -9` (or by the OOM killer) cannot end its own run; the next
    stage or pipeline that starts closes it, so the UI never shows a run RUNNING forever.
    """
    import mlflow

    client = mlflow.MlflowClient()
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"attributes.status = 'RUNNING' and tags.`wander.host` = '{socket.gethostname()}'",
    )
    closed = []
    for run in runs:
        pid = run.data.tags.get("wander.pid", "")
        if pid.isdigit() and int(pid) != os.getpid() and not alive(int(pid)):
            client.set_tag(run.info.run_id, "wander.end", f"process {pid} ended without closing this run")
            client.set_terminated(run.info.run_id, status="KILLED")
            closed.append(run.info.run_id)
    return closed


@contextlib.contextmanager
def pipeline_run(
    name: str = "pipeline",
    params: Mapping | None = None,
    root: str | os.PathLike = ".",
    experiment: str | None = None,
) -> Iterator[str]:
    """Open the parent run; yield its id, exported as WANDER_PARENT_RUN_ID so stages (subprocesses) nest under it."""
    import mlflow

    experiment_id = setup(root, experiment)
    close_dead_runs(experiment_id)
    previous = os.environ.get(PARENT_RUN_ENV)
    with mlflow.start_run(
        experiment_id=experiment_id, run_name=name, tags={"wander.kind": "pipeline", **_owner()}
    ) as run:
        if params:
            mlflow.log_params(loggable(params))
        os.environ[PARENT_RUN_ENV] = run.info.run_id
        try:
            with _killed_when_stopped():
                yield run.info.run_id
        finally:
            if previous is None:
                os.environ.pop(PARENT_RUN_ENV, None)
            else:
                os.environ[PARENT_RUN_ENV] = previous


@contextlib.contextmanager
def stage_run(
    stage: str, params: Mapping | None = None, root: str | os.PathLike = ".", experiment: str | None = None
) -> Iterator[Any]:
    """Open a stage's run, nested under WANDER_PARENT_RUN_ID (or this process's active run); log params; yield it."""
    import mlflow

    experiment_id = setup(root, experiment)
    close_dead_runs(experiment_id)
    tags = {"wander.kind": "stage", "wander.stage": stage, **_owner()}
    if mlflow.active_run() is not None:
        # Called inside a run of this very process (a flow running stages in-process): nest under it.
        nesting = {"nested": True}
    else:
        nesting = {"parent_run_id": os.environ.get(PARENT_RUN_ENV) or None}
    # The guard opens with the run: a stop while the params are logged (tens of ms) ends it KILLED, not FAILED.
    with (
        mlflow.start_run(experiment_id=experiment_id, run_name=stage, tags=tags, **nesting) as run,
        _killed_when_stopped(),
    ):
        if params:
            mlflow.log_params(loggable(params))
        yield run


@contextlib.contextmanager
def _killed_when_stopped() -> Iterator[None]:
    """End the active run KILLED when a stop (a signal, a cancellation: a BaseException that is no Exception)
    unwinds through it; MLflow would record FAILED, which an error gets."""
    import mlflow

    try:
        yield
    except BaseException as e:
        if not isinstance(e, (Exception, GeneratorExit)):
            mlflow.end_run("KILLED")
        raise


def _active() -> Any:
    # Nobody imported mlflow: no run can be active, and the import would cost a second.
    if "mlflow" not in sys.modules:
        return None
    import mlflow

    return mlflow.active_run()


def log_metrics(metrics: Mapping, step: int | None = None, prefix: str = "") -> bool:
    """Log the numbers of a (nested) metrics dict to the active run, keys joined by '/'; True if it logged."""
    if _active() is None:
        return False
    import mlflow

    numbers = {
        f"{prefix}{k}": float(v)
        for k, v in flatten(metrics).items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }
    if numbers:
        mlflow.log_metrics(numbers, step=step)
    return True


def log_artifact(path: str | os.PathLike, artifact_path: str | None = None) -> bool:
    """Log a file or folder to the active run; True if it logged."""
    if _active() is None:
        return False
    import mlflow

    path = Path(path)
    if path.is_dir():
        mlflow.log_artifacts(str(path), artifact_path=artifact_path)
    else:
        mlflow.log_artifact(str(path), artifact_path=artifact_path)
    return True


def log_dict(data: object, artifact_file: str) -> bool:
    """Log a JSON-ready object as an artifact file of the active run (e.g. sample games); True if it logged."""
    if _active() is None:
        return False
    import mlflow

    mlflow.log_dict(data, artifact_file)
    return True


def log_params(params: Mapping[str, Any]) -> bool:
    """Log params on the active run (e.g. what a null setting resolved to); True if it logged."""
    if _active() is None:
        return False
    import mlflow

    mlflow.log_params(loggable(params))
    return True


def set_tags(tags: Mapping[str, Any]) -> bool:
    """Set tags on the active run (e.g. data lineage); True if it logged."""
    if _active() is None:
        return False
    import mlflow

    mlflow.set_tags({k: str(v) for k, v in tags.items()})
    return True


def write_metrics(path: str | os.PathLike, metrics: Mapping) -> Path:
    """Write a stage's metrics JSON (a DVC metrics file) atomically and log its numbers to the active run."""
    log_metrics(metrics)
    return write_json(path, dict(metrics))


def write_stage_metrics(layout: Layout, stage: str, headline: Mapping, details: Mapping) -> Path:
    """Write a stage's flat headline as its DVC metrics file (`<layout.metrics>/<stage>.json`) and the breakdown
    to `<layout.details>/<stage>.json` (a plain DVC out), both atomically; log both to the active run.

    DVC shows every number of a metrics file as a column of `dvc metrics show` and `dvc exp show`: a breakdown
    per stratum or per filter would bury the few numbers a person compares across experiments.
    """
    log_metrics({**details, **headline})
    write_json(Path(layout.details) / f"{stage}.json", dict(details))
    return write_json(Path(layout.metrics) / f"{stage}.json", dict(headline))


def loggable(params: Mapping) -> dict[str, Any]:
    """Params as MLflow logs them: flattened, with the credentials of any URL masked (`http://***@host/v1`)."""
    return {k: redact_url(v) if isinstance(v, str) else v for k, v in flatten(params).items()}
