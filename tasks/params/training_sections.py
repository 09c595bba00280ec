"""The sections of the training stages: `sft`, and `grpo` with its curriculum of stages (`GRPOStage`)."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator
from pydantic.dataclasses import dataclass as checked

from tasks.params.section_base import FORBID, Section
from wander.training.curriculum_config import CurriculumStage
from wander.training.rollout_config import RolloutConfig


@dataclasses.dataclass
class _GRPOStage(CurriculumStage):
    start: str = "sft"
    """Model folder under `layout.models` the stage trains from: `sft` or `grpo-<earlier stage>`."""
    env: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """The stage's env settings, one block per environment (tic-tac-toe: `random_move_prob`, the opponent range);
    the block of `env.name` applies, an environment without one plays the stage with its own settings."""

    def __post_init__(self) -> None:
        super().__post_init__()
        # One way to say a stage's env settings in params: per env, so another env.name never meets them.
        for key in ("random_move_prob", "env_kwargs"):
            if getattr(self, key):
                raise ValueError(
                    f"stage {self.name!r}: write {key} per environment, e.g. env: {{tictactoe: {{random_move_prob: "
                    "[0.0, 0.5]}}} (an environment without a block plays with its own settings)"
                )

    def curriculum_stage(self, env: str, settings: dict[str, Any]) -> CurriculumStage:
        """The library's stage for env `env`: its block here over `settings` (the section's) as `env_kwargs`."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(CurriculumStage)}
        return CurriculumStage(**{**fields, "env_kwargs": {**settings, **self.env.get(env, {})}})


GRPOStage = checked(_GRPOStage, config=FORBID)


def _lora_options(value: dict[str, Any] | None) -> dict[str, Any] | None:
    from wander.training.lora import lora_config

    lora_config(value)  # unknown fields or bad values fail when params are read, before any stage runs
    return value


LoraOptions = Annotated[dict[str, Any] | None, AfterValidator(_lora_options)]


class TrainingCompute(Section):
    """How a training stage computes, the same keys for SFT and GRPO: precision, CPU threads, LoRA."""

    bf16: bool | None = None
    """bf16 mixed precision (autocast; the weights and optimizer stay float32). Null = where CUDA supports it; true
    on a CPU too (fast where it has AMX bf16 units, `amx_bf16` in /proc/cpuinfo: docs/experiments/chat-model.md)."""
    torch_threads: int = Field(0, ge=0)
    """CPU threads for torch; 0 keeps torch's default."""
    lora: LoraOptions = None
    """null = full fine-tuning; else LoRA through TRL's `peft_config`: peft `LoraConfig` fields over
    `wander.training.lora.LORA_DEFAULTS` (`{}` = rank 16 on every linear layer). Adapters are merged when the stage
    saves: the next stage, vLLM and the registry load a plain model."""


class SFT(TrainingCompute):
    """TRL SFTTrainer on whole curated games, assistant-only loss. Keys named like `SFTConfig` fields go to it."""

    num_train_epochs: float | None = Field(None, gt=0.0)
    """Passes over the curated games; null = the env's recipe (envs/<name>/recipe.yaml, tasks/params/recipe.py)."""
    per_device_train_batch_size: int | None = Field(None, ge=1)
    """Conversations per micro-batch (CPU: keep under ~4k tokens); null = the env's recipe (why each env's:
    docs/experiments/environments.md)."""
    gradient_accumulation_steps: int = Field(1, ge=1)
    """Micro-batches per optimizer step."""
    learning_rate: float | None = Field(None, gt=0.0)
    """Peak learning rate; null = the env's recipe (why tic-tac-toe's: docs/experiments/defaults.md#sft)."""
    lr_scheduler_type: str = "cosine"
    """transformers learning-rate schedule."""
    warmup_steps: int = Field(30, ge=0)
    """Linear warm-up steps."""
    max_length: int = Field(3072, ge=1)
    """Tokens per game kept (curate already checks lengths)."""
    logging_steps: int = Field(50, ge=1)
    """Steps between logged metrics (to MLflow)."""
    save_steps: int = Field(200, ge=1)
    """Steps between resumable checkpoints."""
    seed: int = 0
    """Seed of data order and dropout."""


def default_stages() -> dict[str, Any]:
    # Every opponent skill first, then the stronger half, so defence is what the next updates train; then a slow
    # polish against the weaker half (why: docs/experiments/defaults.md#grpo).
    stages = {
        "wide": ("sft", [0.0, 1.0], 40),
        "strong": ("grpo-wide", [0.0, 0.5], 60),
        "polish": ("grpo-strong", [0.5, 1.0], 80),
    }
    return {
        name: GRPOStage(
            name=name, start=start, max_steps=steps, env={"tictactoe": {"random_move_prob": skills}}
        )
        for name, (start, skills, steps) in stages.items()
    }


class GRPO(TrainingCompute):
    """One DVC stage per curriculum stage; keys named like `GRPOConfig` fields go to the trainer config."""

    stages: dict[str, GRPOStage] = Field(default_factory=default_stages, min_length=1)
    """Curriculum stages in order, name -> `CurriculumStage` fields plus `start` (wander/training/curriculum_config.py).
    A stage's `max_steps` left null is the env's recipe (for the stages wide, strong and polish)."""
    num_generations: int = Field(8, ge=2)
    """Episodes per group (same spec, same opponent)."""
    batch_size: int = Field(CurriculumStage.batch_size, ge=1)
    """Samples per optimizer step, every stratum covered: the default of each stage's batch_size (the library's,
    `CurriculumStage.batch_size`). params.yaml sets 64 (why: docs/experiments/defaults.md#grpo)."""
    per_device_train_batch_size: int = Field(64, ge=1)
    """Samples per micro-batch."""
    learning_rate: float | None = Field(None, gt=0.0)
    """Learning rate (a stage may override it); null = the env's recipe."""
    lr_scheduler_type: str = "constant_with_warmup"
    """transformers learning-rate schedule."""
    warmup_steps: int = Field(10, ge=0)
    """Linear warm-up steps of each stage."""
    num_iterations: int = Field(1, ge=1)
    """Optimizer passes over each batch of episodes (rollouts are most of a step's cost)."""
    beta: float = Field(0.0, ge=0.0)
    """KL coefficient to the start model (TRL's `beta`); 0 loads no reference model."""
    curve_every: int = Field(10, ge=0)
    """Steps between learning-curve points (the env's `curve_metrics`, greedy); 0 = no curve."""
    keep_best: bool = True
    """Save the model of the best learning-curve point (the env's `curve_score`, the start model included), not
    the last step's; needs `curve_every`."""
    env: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Training-only env settings of every stage, one block per environment, over `env.<name>` (a stage's own
    `env` block goes over these); none by default. params.yaml sets tic-tac-toe's `invalid_penalty` -0.5 per
    invalid move in training (docs/experiments/defaults.md); evaluation keeps the env's -0.1."""
    play_on: Literal["sample", "greedy", "expected", "best"] | None = None
    """Decision rollouts: after the sampled branch move, the game goes on sampled, greedy, or not at all with the
    move rewarded by its expected outcome over the env's randomness, model greedy ("expected") or with the env's
    own best play after it ("best") (`RolloutConfig.play_on`). Null = the env's recipe (why tic-tac-toe's
    "expected": docs/experiments/defaults.md#grpo); "sample" (the library's) for an env whose turns read the whole
    conversation, which any other value would not change (preflight refuses it)."""
    explore: float = Field(RolloutConfig.explore, ge=0.0, lt=1.0)
    """Decision rollouts: share of each group's samples whose branch move is one the group did not sample
    (`RolloutConfig.explore`)."""
    branch_at: Literal["depth", "mistake", "token"] = RolloutConfig.branch_at
    """Decision rollouts: each group answers the position after a seeded prefix of sampled turns ("depth"), or
    where the model, greedy, loses the most reward by its own reply ("mistake"); a single-turn env's groups differ
    at one token of the greedy reply, the one the model is least sure of ("token") (`RolloutConfig.branch_at`)."""
    tool_protocol: Literal["environment_factory", "rollout_func"] = RolloutConfig.tool_protocol
    """A tool env's rollouts: through TRL's tool loop, the tools rendered by the model's chat template
    ("environment_factory"), or the env's own text protocol, as its SFT data and evaluation play it ("rollout_func")
    (`RolloutConfig.tool_protocol`). params.yaml sets "rollout_func" (why: docs/experiments/defaults.md#grpo)."""
    max_completion_length: int | None = Field(None, ge=1)
    """Tokens per model turn (a tool env trained through TRL's tool loop: per whole completion, tool results
    included); null = the env's reply budget (`reply_tokens()` / `completion_tokens()`, wander/core/pipeline_hooks.py),
    resolved by the stage and printed in the run summary."""
    logging_steps: int = Field(10, ge=1)
    """Steps between logged metrics (to MLflow)."""
    save_steps: int = Field(50, ge=1)
    """Steps between resumable checkpoints."""
    seed: int = 0
    """Seed of sampling and data order."""

    def rollout(self) -> RolloutConfig:
        """The rollout settings the stages train with."""
        return RolloutConfig(
            play_on=self.play_on or RolloutConfig.play_on,  # null outside load_params: no recipe filled it
            explore=self.explore,
            branch_at=self.branch_at,
            tool_protocol=self.tool_protocol,
        )

    @model_validator(mode="before")
    @classmethod
    def _stage_names(cls, data: Any) -> Any:
        # A stage's name is its key, and the section's batch_size is every stage's default.
        if isinstance(data, dict) and isinstance(data.get("stages"), dict):
            batch = data.get("batch_size", cls.model_fields["batch_size"].default)
            stages = {
                k: {"name": k, "batch_size": batch, **v} if isinstance(v, dict) else v
                for k, v in data["stages"].items()
            }
            data = {**data, "stages": stages}
        return data
