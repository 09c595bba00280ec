"""What `wander ui` reads of a pipeline run's files: its evaluation and its stages' metrics.

Everything is read in place (no copy), where the run's `RunConfig` (wander/ui/run_config.py) says it lies: the
evaluate stage's `matrix.json` and `episodes.jsonl.gz`, and each stage's `<metrics>/<stage>.json`. No params file is
read here, nor MLflow's store: the registry and the learning curves come through a `RunStore`
(wander/ui/tracking_store.py), which the app is handed beside these files.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from wander.eval.episodes_file import read_episodes
from wander.eval.outputs import OUTPUTS
from wander.ui.run_config import RunConfig


class RunMissing(FileNotFoundError):
    """A file of the run is not there: the message names it and the command that makes it."""


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
