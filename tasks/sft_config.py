"""Settings of the sft stage: TRL SFTTrainer warm-up on the curated teacher games."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class SFTStageConfig:
    """SFT of the base model on whole curated games (one conversation per game, assistant-only loss)."""

    epochs: float = field(default=3.0, metadata={"help": "Passes over the curated games."})
    batch_size: int = field(
        default=16, metadata={"help": "Games per micro-batch (CPU: keep under ~4k tokens)."}
    )
    gradient_accumulation_steps: int = field(
        default=1, metadata={"help": "Micro-batches per optimizer step."}
    )
    learning_rate: float = field(default=2e-3, metadata={"help": "Peak learning rate (cosine schedule)."})
    warmup_steps: int = field(default=30, metadata={"help": "Linear warm-up steps."})
    max_length: int = field(
        default=1024, metadata={"help": "Tokens per game kept (curate already checks it)."}
    )
    logging_steps: int = field(default=20, metadata={"help": "Steps between logged metrics (to MLflow)."})
    save_steps: int = field(default=100, metadata={"help": "Steps between resumable checkpoints."})
    seed: int = field(default=0, metadata={"help": "Seed of data order and dropout."})
    torch_threads: int = field(
        default=0, metadata={"help": "CPU threads for torch; 0 keeps torch's default."}
    )
    base_model: str = field(
        default="data/models/base", metadata={"help": "Start model.", "from": "layout.base_model"}
    )
    data_dir: str = field(default="data/sft", metadata={"help": "Curated games.", "from": "layout.sft"})
    models_dir: str = field(
        default="data/models", metadata={"help": "Writes <models>/sft.", "from": "layout.models"}
    )
    work_dir: str = field(
        default="data/work", metadata={"help": "Checkpoints to resume.", "from": "layout.work"}
    )
    metrics_dir: str = field(default="data/metrics", metadata={"help": "sft.json.", "from": "layout.metrics"})

    def __post_init__(self) -> None:
        if self.epochs <= 0 or self.batch_size < 1 or self.learning_rate <= 0:
            raise ValueError("epochs, batch_size and learning_rate must be positive")

    def to_dict(self) -> dict:
        """The config as a plain dict (for MLflow params)."""
        return asdict(self)
