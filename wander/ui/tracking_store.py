"""What `wander ui` asks of the tracking store (MLflow's, for the project): a small protocol, `RunStore`.

The library never imports mlflow, so it never reads MLflow's store itself: whoever starts the UI hands it a
`RunStore` (the project's `python -m flows.ui` builds one on MLflow's client: tasks/runtime/tracking_reader.py), or
none (the library's own `wander ui`), and then the pages say so in one line (`NO_STORE`) and show what the run's
files hold. The store answers with plain values: the registered model's versions, an alias's checkpoint folder on
this machine, and the learning curves of the newest pipeline run's stages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

NO_STORE = (
    "no tracking store connected: `wander ui` reads the run's files only; `make app` (python -m flows.ui) reads "
    "the registry and the curves through MLflow's client"
)
# Per-step metrics worth a curve; every `curve/...` key (a GRPO stage's greedy games) is shown too.
CURVE_KEYS = ("loss", "eval_loss", "reward", "reward_std", "entropy", "learning_rate")


class TrackingStoreError(RuntimeError):
    """The tracking store did not answer: the message says where it is and why."""


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


class RunStore(Protocol):
    """The tracking store as the UI reads it; a failure to reach it is a `TrackingStoreError`."""

    @property
    def location(self) -> str:
        """Where the store is, as the pages name it (credentials masked)."""
        ...

    def versions(self, model: str) -> list[Version]:
        """The registered versions of `model`, newest first, with their tags and aliases (empty: none)."""
        ...

    def checkpoint(self, model: str, alias: str) -> Path | None:
        """The checkpoint folder, on this machine, of the version of `model` that `alias` points at; None: no such
        alias."""
        ...

    def curves(self) -> list[StageCurves]:
        """The learning curves of every stage run of the newest pipeline run, in the order the stages ran."""
        ...


def is_curve(key: str) -> bool:
    """Whether a logged metric is drawn as a learning curve (`curve/seconds`, a stage's timing, is not)."""
    return key in CURVE_KEYS or (key.startswith("curve/") and key != "curve/seconds")


def stage_curves(stage: str, series: dict[str, list[tuple[int, float]]]) -> StageCurves | None:
    """A stage's curves: the series of more than one step (a single point is no curve); None when none is left."""
    kept = {key: points for key, points in series.items() if len({step for step, _ in points}) > 1}
    return StageCurves(stage, kept) if kept else None
