"""Settings of the register stage: which checkpoint becomes a model version, and when it is champion."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RegisterConfig:
    """Register the evaluated checkpoint in MLflow with its lineage; move `champion` only if it is better."""

    model_name: str = "wander-tictactoe"
    """Registered model name in the MLflow registry."""

    candidate: str = "grpo"
    """Row of the evaluation matrix (and lineage entry) that is registered."""

    lineage: dict[str, str] = field(default_factory=dict)
    """Checkpoints in training order, name -> folder (e.g. base, sft, grpo stages); the last is the candidate's parent chain."""

    datasets: list[str] = field(default_factory=list)
    """Data folders the candidate was trained on; their DVC hashes become version tags."""

    eval_dir: str = "data/eval"
    """Folder of the evaluate stage's matrix.json and matrix.csv."""

    baseline: str | None = "teacher"
    """Matrix row the candidate must be no worse than in any column (the teacher); null skips that gate."""

    alias: str = "champion"
    """Alias that marks the best version so far."""

    metric: str = "non_loss"
    """Rate compared between candidate and champion, per matrix column, from the 95% intervals."""

    max_new_tokens: int = 64
    """Token budget per reply when the champion is replayed; keep it equal to the evaluate stage's."""

    metrics_dir: str = field(default="data/metrics", metadata={"from": "layout.metrics"})
    """Folder of the stage's metrics file, register.json."""

    lock_file: str = "dvc.lock"
    """Where DVC records output hashes; the lineage tags are read from it."""
