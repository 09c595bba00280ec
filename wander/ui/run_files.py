"""What `wander ui` reads of a pipeline run: its evaluation files, stage metrics and the local MLflow store.

Everything is read in place (no copy), where the run's `RunConfig` (wander/ui/run_config.py) says it lies: the
evaluate stage's `matrix.json` and `episodes.jsonl.gz`; each stage's `<metrics>/<stage>.json`; and MLflow's sqlite
store, opened read-only with `sqlite3` (the library never imports mlflow): the registry's versions, tags and aliases,
and the metrics every stage run logged per step (the learning curves). No params file is read here.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wander.eval.episodes_file import read_episodes
from wander.eval.outputs import OUTPUTS
from wander.ui.run_config import RunConfig

MLFLOW_DB = "mlflow/mlflow.db"
# Per-step metrics worth a curve; every `curve/...` key (a GRPO stage's greedy games) is shown too.
CURVE_KEYS = ("loss", "eval_loss", "reward", "reward_std", "entropy", "learning_rate")


class RunMissing(FileNotFoundError):
    """A file of the run is not there: the message names it and the command that makes it."""


@dataclass
class Version:
    """One registered model version: its tags and the aliases pointing at it."""

    model: str
    version: int
    tags: dict[str, str]
    aliases: list[str] = field(default_factory=list)


@dataclass
class StageCurves:
    """One stage run's per-step metrics: key -> [(step, value)]."""

    stage: str
    series: dict[str, list[tuple[int, float]]]


class RunFiles:
    """A run's files, read lazily where `config` says they lie; episodes are cached until their file changes."""

    def __init__(self, config: RunConfig):
        self.config = config
        self.root = Path(config.root).resolve()
        self._episodes: tuple[float, list[dict]] | None = None
        self._lock = threading.Lock()

    def lineage(self) -> list[tuple[str, Path]]:
        """The checkpoints in training order, name -> folder under the project root."""
        return [(name, self.root / folder) for name, folder in self.config.lineage.items()]

    @property
    def eval_dir(self) -> Path:
        """The evaluate stage's output folder."""
        return self.root / self.config.eval_dir

    @property
    def mlflow_db(self) -> Path:
        """MLflow's sqlite store of the run."""
        return self.root / MLFLOW_DB

    # ----- the evaluation -----

    def eval_file(self, kind: str) -> Path:
        """One of the evaluate stage's outputs; `RunMissing` names it when it is absent."""
        path = self.eval_dir / OUTPUTS[kind]
        if not path.is_file():
            raise RunMissing(f"no evaluation run: {path} is missing; run the pipeline first (`make run`)")
        return path

    def matrix(self) -> dict[str, Any]:
        """The evaluate stage's `matrix.json`."""
        return json.loads(self.eval_file("matrix").read_text(encoding="utf-8"))

    def episodes(self) -> list[dict]:
        """Every evaluation game, with its cell (read once per version of the file)."""
        path = self.eval_file("episodes")
        mtime = path.stat().st_mtime
        with self._lock:
            if self._episodes is None or self._episodes[0] != mtime:
                self._episodes = (mtime, read_episodes(path))
            return self._episodes[1]

    def stage_metrics(self) -> dict[str, dict[str, Any]]:
        """Each stage's headline metrics, by stage name (file stem); a stage made of parts (grpo: one headline per
        curriculum stage, by model row) gives each part's under its own name too."""
        if self.config.metrics_dir is None:
            return {}
        folder = self.root / self.config.metrics_dir
        if not folder.is_dir():
            return {}
        out = {}
        for path in sorted(folder.glob("*.json")):
            headline = json.loads(path.read_text(encoding="utf-8"))
            out[path.stem] = headline
            if headline and all(isinstance(v, dict) for v in headline.values()):
                out.update(headline)
        return out

    # ----- the MLflow store -----

    def _db(self) -> sqlite3.Connection | None:
        path = self.mlflow_db
        if not path.is_file():
            return None
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)

    def versions(self) -> list[Version]:
        """The registered versions of the run's model, newest first (empty without a store or a model name)."""
        name = self.config.model_name
        db = None if name is None else self._db()
        if db is None:
            return []
        with contextlib.closing(db):
            rows = db.execute(
                "select version from model_versions where name = ? order by version desc", (name,)
            ).fetchall()
            tags = db.execute(
                "select version, key, value from model_version_tags where name = ?", (name,)
            ).fetchall()
            aliases = db.execute(
                "select version, alias from registered_model_aliases where name = ?", (name,)
            ).fetchall()
        versions = {int(v): Version(name, int(v), {}) for (v,) in rows}
        for v, key, value in tags:
            versions[int(v)].tags[key] = value
        for v, alias in aliases:
            versions[int(v)].aliases.append(alias)
        return list(versions.values())

    def alias_checkpoint(self, alias: str) -> Path | None:
        """The checkpoint folder of the version an alias (e.g. `champion`) points at, or None."""
        for version in self.versions():
            if alias in version.aliases and "wander.checkpoint" in version.tags:
                return self.root / version.tags["wander.checkpoint"]
        return None

    def curves(self) -> list[StageCurves]:
        """The learning curves of every stage run of the newest pipeline run, in the order the stages ran."""
        db = self._db()
        if db is None:
            return []
        with contextlib.closing(db):
            parent = db.execute(
                "select t.value from runs r join tags t on t.run_uuid = r.run_uuid and t.key = 'mlflow.parentRunId' "
                "where r.lifecycle_stage = 'active' order by r.start_time desc limit 1"
            ).fetchone()
            if parent is None:
                return []
            stages = db.execute(
                "select r.run_uuid, r.name from runs r join tags t on t.run_uuid = r.run_uuid "
                "and t.key = 'mlflow.parentRunId' and t.value = ? order by r.start_time",
                parent,
            ).fetchall()
            out = []
            for run_id, name in stages:
                series: dict[str, list[tuple[int, float]]] = {}
                for key, step, value in db.execute(
                    "select key, step, value from metrics where run_uuid = ? order by key, step, timestamp",
                    (run_id,),
                ):
                    if key in CURVE_KEYS or (key.startswith("curve/") and key != "curve/seconds"):
                        series.setdefault(key, []).append((int(step), float(value)))
                series = {k: v for k, v in series.items() if len({s for s, _ in v}) > 1}
                if series:
                    out.append(StageCurves(name, series))
        return out
