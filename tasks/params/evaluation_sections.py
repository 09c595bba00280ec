"""The sections of the stages that judge the models: `evaluate` (the library's `EvaluateConfig`) and `register`."""

from __future__ import annotations

from pydantic import Field

from tasks.params.section_base import Section
from tasks.params.training_sections import default_stages
from wander.eval.config import EvaluateConfig


def _lineage() -> dict[str, str]:
    # The models of the default curriculum in training order: the evaluation's model rows, register's lineage.
    models = ["base", "sft", *(f"grpo-{stage}" for stage in default_stages())]
    return {name: f"data/models/{name}" for name in models}


class Evaluate(Section, EvaluateConfig):
    """The evaluate stage's section: `wander.eval.config.EvaluateConfig`, its keys and defaults. params.yaml's
    `policies` are the pipeline's lineage (base, sft, each GRPO stage) and the teacher, where the library's
    default rows are the teacher alone."""


class Register(Section):
    """Register the evaluated candidate in MLflow with its lineage; move `champion` only when it is better."""

    model_name: str | None = None
    """Registered model name; null = `wander-<env.name>`."""
    candidate: str = "grpo-polish"
    """Row of the evaluation matrix (and lineage entry) registered."""
    lineage: dict[str, str] = Field(default_factory=_lineage)
    """Checkpoints in training order, name -> folder."""
    datasets: list[str] = Field(default_factory=lambda: ["data/datasets", "data/sft"])
    """Data folders the candidate was trained on; their DVC hashes become version tags."""
    eval_dir: str = EvaluateConfig.model_fields["out_dir"].default
    """Folder of the evaluate stage's matrix.json and matrix.csv (evaluate's `out_dir`)."""
    baseline: str | None = "teacher"
    """Matrix row the candidate must be no worse than in any column (the teacher); null skips that gate."""
    alias: str = "champion"
    """Alias of the best version so far."""
    metric: str | None = None
    """Metric compared between candidate and champion per matrix column (95% intervals); null = the env's
    headline metric (tic-tac-toe: non_loss)."""
    max_new_tokens: int | None = Field(EvaluateConfig.model_fields["max_new_tokens"].default, ge=1)
    """Tokens per reply when the champion is replayed; null = the env's reply budget, as evaluate's (the preflight
    refuses two different budgets)."""
    lock_file: str = "dvc.lock"
    """Where DVC records output hashes (read for the lineage tags)."""
