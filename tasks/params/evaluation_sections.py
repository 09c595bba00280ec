"""The sections of the stages that judge the models: `evaluate` (the library's `EvaluateConfig`) and `register`."""

from __future__ import annotations

from pydantic import Field, model_validator

from tasks.params.section_base import Section
from wander.eval.config import EvaluateConfig


class Evaluate(Section, EvaluateConfig):
    """The evaluate stage's section: `wander.eval.config.EvaluateConfig`, its keys and defaults, but `policies`."""

    policies: dict[str, str] | None = Field(None, min_length=1)
    """Row name -> policy spec, in row order (`EvaluateConfig.policies`); null = the pipeline's lineage (base, sft,
    each stage of the env's GRPO curriculum) and the env's teacher, filled when params are loaded."""

    # The library's rules on the rows wait for them: null rows are filled from the curriculum, then checked.
    @model_validator(mode="after")
    def _vllm_rows_are_models(self) -> Evaluate:
        return self if self.policies is None else EvaluateConfig._vllm_rows_are_models(self)

    @model_validator(mode="after")
    def _baseline_is_a_row(self) -> Evaluate:
        return self if self.policies is None else EvaluateConfig._baseline_is_a_row(self)


class Register(Section):
    """Register the evaluated candidate in MLflow with its lineage; move `champion` only when it is better."""

    model_name: str | None = None
    """Registered model name; null = `wander-<env.name>`."""
    candidate: str | None = None
    """Row of the evaluation matrix (and lineage entry) registered; null = the last stage of the GRPO curriculum."""
    lineage: dict[str, str] | None = Field(None, min_length=1)
    """Checkpoints in training order, name -> folder; null = base, sft and each stage of the GRPO curriculum."""
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
