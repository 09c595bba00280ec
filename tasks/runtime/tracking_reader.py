"""The UI's tracking store (`wander.ui.tracking_store.RunStore`) read through MLflow's client, never its files.

The store is the one the stages log to (`MLFLOW_TRACKING_URI`, else the project's sqlite store), so the UI shows the
same registry and curves on a team's tracking server as on a laptop. An alias's checkpoint is the version's
`wander.checkpoint` folder when it is on this machine, else the version's artifacts (the pyfunc model `register`
logged, the checkpoint inside) downloaded once into `mlflow/downloads/<model>/<version>` and kept: a version's
artifacts never change. The curves are the metric histories of the newest pipeline run's stage runs. It only reads:
a project store not made yet (no run) is read as empty, not created.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tasks.params.yaml_file import read_yaml
from tasks.runtime.tracking import STORE_DIR, tracking_uri
from wander.core.logs import redact_url
from wander.ui.tracking_store import StageCurves, TrackingStoreError, Version, is_curve, stage_curves

CHECKPOINT_TAG = "wander.checkpoint"  # register's tag: the checkpoint folder, relative to the project root
PARENT_TAG = "mlflow.parentRunId"
# Under the project's mlflow/ (gitignored): the versions whose checkpoint was not on this machine.
DOWNLOADS = "downloads"
NOT_FOUND = "RESOURCE_DOES_NOT_EXIST"


class MlflowRunStore:
    """The tracking store at `uri` (default: the one the stages log to) for the project in `root`."""

    def __init__(self, root: str | os.PathLike, uri: str | None = None):
        self.root = Path(root).resolve()
        self.uri = uri or tracking_uri(self.root)
        self.downloads = self.root / STORE_DIR / DOWNLOADS
        self._client: Any = None

    @property
    def location(self) -> str:
        """Where the store is, credentials masked."""
        return redact_url(self.uri)

    def versions(self, model: str) -> list[Version]:
        """The registered versions of `model`, newest first, with their tags and aliases (empty: none)."""
        client = self._reader()
        if client is None:
            return []
        with self._answering():
            registered = self._registered(client, model)
            if registered is None:
                return []
            found = _every(
                lambda token: client.search_model_versions(f"name = {_quoted(model)}", page_token=token)
            )
        # From the registered model: sqlite's store leaves a searched version's own aliases empty.
        aliases = registered.aliases.items()
        versions = [
            Version(
                model, int(v.version), dict(v.tags), sorted(a for a, n in aliases if int(n) == int(v.version))
            )
            for v in found
        ]
        return sorted(versions, key=lambda v: v.version, reverse=True)

    def checkpoint(self, model: str, alias: str) -> Path | None:
        """The checkpoint folder of the version `alias` points at: its `wander.checkpoint` folder when it is here,
        else the version's artifacts downloaded (once); None when no version has that alias."""
        client = self._reader()
        if client is None:
            return None
        with self._answering():
            registered = self._registered(client, model)
            if registered is None or alias not in registered.aliases:
                return None
            version = client.get_model_version(model, str(registered.aliases[alias]))
            tagged = version.tags.get(CHECKPOINT_TAG)
            if tagged and (self.root / tagged).is_dir():
                return self.root / tagged
            return self._downloaded(client, model, str(version.version))

    def curves(self) -> list[StageCurves]:
        """The learning curves of every stage run of the newest pipeline run, in the order the stages ran."""
        client = self._reader()
        if client is None:
            return []
        out = []
        with self._answering():
            for run in self._stage_runs(client):
                series = {}
                for key in sorted(k for k in run.data.metrics if is_curve(k)):
                    history = client.get_metric_history(run.info.run_id, key)
                    series[key] = [(int(m.step), float(m.value)) for m in sorted(history, key=_logged)]
                curves = stage_curves(run.info.run_name, series)
                if curves is not None:
                    out.append(curves)
        return out

    @staticmethod
    def _stage_runs(client: Any) -> list:
        """The runs under the parent of the newest active nested run, oldest first (whatever their lifecycle)."""
        from mlflow.entities import ViewType

        # Every experiment's runs, deleted experiments too: a pipeline logs wherever WANDER_EXPERIMENT said.
        found = _every(lambda token: client.search_experiments(view_type=ViewType.ALL, page_token=token))
        experiments = [e.experiment_id for e in found]
        newest = experiments and client.search_runs(
            experiments,
            f"tags.`{PARENT_TAG}` IS NOT NULL",
            max_results=1,
            order_by=["attributes.start_time DESC"],
        )
        if not newest:
            return []
        parent = _quoted(newest[0].data.tags[PARENT_TAG])
        return _every(
            lambda token: client.search_runs(
                experiments,
                f"tags.`{PARENT_TAG}` = {parent}",
                run_view_type=ViewType.ALL,
                order_by=["attributes.start_time ASC"],
                page_token=token,
            )
        )

    # ----- reaching the store -----

    def _reader(self) -> Any:
        """The client, or None while the project's sqlite store does not exist (opening it would create it)."""
        if self.uri.startswith("sqlite:///") and not Path(self.uri.removeprefix("sqlite:///")).is_file():
            return None
        if self._client is None:
            import mlflow

            with self._answering():
                self._client = mlflow.MlflowClient(tracking_uri=self.uri)
        return self._client

    @contextlib.contextmanager
    def _answering(self) -> Iterator[None]:
        """MLflow's errors and a server that does not answer (requests' errors are OSErrors) as the UI's one line."""
        from mlflow.exceptions import MlflowException

        try:
            yield
        except (MlflowException, OSError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise TrackingStoreError(
                f"could not read the tracking store at {self.location}: {first}"
            ) from exc

    @staticmethod
    def _registered(client: Any, model: str) -> Any:
        """The registered model, or None when there is none of that name."""
        from mlflow.exceptions import MlflowException

        try:
            return client.get_registered_model(model)
        except MlflowException as exc:
            if exc.error_code == NOT_FOUND:
                return None
            raise

    def _downloaded(self, client: Any, model: str, version: str) -> Path:
        """The version's checkpoint in its downloaded artifacts, downloading them first if they are not here."""
        import mlflow.artifacts

        # Percent-quoted (dots too): any model name is one folder, never `..` or a path.
        folder = self.downloads / quote(model, safe="").replace(".", "%2E") / version
        if not folder.is_dir():
            folder.parent.mkdir(parents=True, exist_ok=True)
            # Into a sibling temporary folder, renamed whole: a cut download never passes for a finished one.
            part = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=folder.parent))
            try:
                got = mlflow.artifacts.download_artifacts(
                    artifact_uri=client.get_model_version_download_uri(model, version),
                    dst_path=str(part),
                    tracking_uri=self.uri,
                )
                try:
                    Path(got).rename(folder)
                except OSError:
                    if not folder.is_dir():  # else another request finished the same download first
                        raise
            finally:
                shutil.rmtree(part, ignore_errors=True)
        return _checkpoint_in(folder)


def _checkpoint_in(folder: Path) -> Path:
    """The `checkpoint` artifact of a pyfunc model folder (register's), or the folder itself when it holds none."""
    spec = folder / "MLmodel"
    if not spec.is_file():
        return folder
    flavors = read_yaml(spec).get("flavors") or {}
    artifacts = (flavors.get("python_function") or {}).get("artifacts") or {}
    inside = (artifacts.get("checkpoint") or {}).get("path")
    if not inside:
        return folder
    path = (folder / inside).resolve()
    if not path.is_relative_to(folder.resolve()):
        raise TrackingStoreError(f"the model in {folder} names a checkpoint outside it: {inside}")
    return path


def _every(fetch: Callable[[str | None], Any]) -> list:
    """Every item of a paged MLflow search, page by page."""
    items, token = [], None
    while True:
        page = fetch(token)
        items.extend(page)
        token = page.token
        if not token:
            return items


def _logged(metric: Any) -> tuple[int, int]:
    """A metric's place in its history: by step, then in logging order."""
    return metric.step, metric.timestamp


def _quoted(value: str) -> str:
    """A string literal of MLflow's search filters (which has no escape): in the quotes `value` does not hold."""
    for mark in ("'", '"'):
        if mark not in value:
            return f"{mark}{value}{mark}"
    raise TrackingStoreError(f"{value!r} holds both kinds of quotes: MLflow's search cannot name it")
