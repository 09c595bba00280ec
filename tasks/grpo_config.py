"""Settings of the grpo stages: one DVC stage per curriculum stage, each from the previous model."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class GRPOStageConfig:
    """GRPO curriculum: shared trainer settings plus `stages`, name -> CurriculumStage fields and `start`."""

    stages: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {
            "wide": {"start": "sft", "random_move_prob": [0.2, 0.7], "max_steps": 100, "temperature": 0.3},
            "strong": {
                "start": "grpo-wide",
                "random_move_prob": [0.0, 0.25],
                "max_steps": 100,
                "temperature": 0.3,
            },
        },
        metadata={
            "help": "Curriculum stages in order; `start` names the model folder under <models> they train."
        },
    )
    num_generations: int = field(
        default=8, metadata={"help": "Episodes per group (same spec, same opponent)."}
    )
    batch_size: int = field(default=32, metadata={"help": "Episodes per optimizer step, all strata covered."})
    per_device_train_batch_size: int = field(default=16, metadata={"help": "Episodes per micro-batch."})
    learning_rate: float = field(default=5e-5, metadata={"help": "Learning rate (a stage may override it)."})
    lr_scheduler_type: str = field(
        default="constant_with_warmup", metadata={"help": "TRL/transformers learning-rate schedule."}
    )
    warmup_steps: int = field(default=10, metadata={"help": "Linear warm-up steps of each stage."})
    num_iterations: int = field(
        default=2,
        metadata={"help": "Optimizer passes over each batch of episodes (rollouts dominate a step)."},
    )
    invalid_penalty: float | None = field(
        default=-0.5,
        metadata={
            "help": "Training-only weight of the env's invalid-move reward (evaluation keeps the env's); null = env's."
        },
    )
    max_completion_length: int = field(default=48, metadata={"help": "Tokens per model turn."})
    logging_steps: int = field(default=10, metadata={"help": "Steps between logged metrics (to MLflow)."})
    save_steps: int = field(default=50, metadata={"help": "Steps between resumable checkpoints."})
    seed: int = field(default=0, metadata={"help": "Seed of sampling and data order."})
    torch_threads: int = field(
        default=0, metadata={"help": "CPU threads for torch; 0 keeps torch's default."}
    )
    env: dict[str, Any] = field(
        default_factory=lambda: {"name": "tictactoe"}, metadata={"help": "Environment.", "from": "env"}
    )
    models_dir: str = field(default="data/models", metadata={"help": "Models.", "from": "layout.models"})
    work_dir: str = field(default="data/work", metadata={"help": "Checkpoints.", "from": "layout.work"})
    metrics_dir: str = field(default="data/metrics", metadata={"help": "Metrics.", "from": "layout.metrics"})

    def __post_init__(self) -> None:
        if not self.stages:
            raise ValueError("grpo.stages needs at least one stage")
        for name, stage in self.stages.items():
            if "start" not in stage:
                raise ValueError(
                    f"grpo stage {name!r} needs `start`: the model folder it trains (sft, grpo-...)"
                )

    def to_dict(self) -> dict:
        """The config as a plain dict (for MLflow params)."""
        return asdict(self)
