"""What `wander ui` is told about a pipeline run, typed: where its files lie, the env it played, its lineage and the
name of its registered model.

The library reads no params file (it sits below the project's params model, .importlinter): the project's
`python -m flows.ui` fills this from params.yaml through that model, and `wander ui` fills it from its own options
for a plain folder, with the defaults below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wander.core.registry import DEFAULT_ENV
from wander.eval.config import EvaluateConfig


@dataclass(frozen=True)
class RunConfig:
    """A run of the project in `root`; every folder is relative to `root` (or absolute)."""

    root: Path
    """The project folder: MLflow's store is `mlflow/mlflow.db` under it, and model folders the Play form loads
    lie under it."""
    eval_dir: str = EvaluateConfig.model_fields["out_dir"].default
    """The evaluate stage's output folder (`matrix.json`, `episodes.jsonl.gz`)."""
    metrics_dir: str | None = None
    """Each stage's headline metrics, `<stage>.json`; None shows none."""
    env: dict[str, Any] = field(default_factory=lambda: {"name": DEFAULT_ENV})
    """`load_environment` keywords of the env the run played: its name and its settings."""
    lineage: dict[str, str] = field(default_factory=dict)
    """The checkpoints in training order, name -> folder."""
    model_name: str | None = None
    """The registered model's name in MLflow's store; None reads no registry (no `champion`, no versions)."""

    @property
    def env_name(self) -> str:
        """The name of the run's env."""
        return self.env["name"]
