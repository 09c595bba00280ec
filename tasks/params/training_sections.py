"""The sections of the training stages: `sft`, and `grpo` with its curriculum of stages (`GRPOStage`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator
from pydantic.dataclasses import dataclass as checked

from tasks.params.section_base import FORBID, Section
from wander.training.curriculum_config import CurriculumStage
from wander.training.rollout_config import RolloutConfig


@dataclasses.dataclass
class _GRPOStage(CurriculumStage):
    env: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The stage's settings of the env it trains (tic-tac-toe: `random_move_prob`, the opponent range), over
    `grpo.env`'s block of that env: a curriculum is one env's, so its settings need no env name."""

    def __post_init__(self) -> None:
        super().__post_init__()
        # One way to say a stage's env settings in params: its `env` block.
        for key in ("random_move_prob", "env_kwargs"):
            if getattr(self, key):
                raise ValueError(
                    f"stage {self.name!r}: write {key} in the stage's env block, e.g. env: {{random_move_prob: "
                    "[0.0, 0.5]}"
                )

    def curriculum_stage(self, settings: dict[str, Any], max_steps: int | None = None) -> CurriculumStage:
        """The library's stage: its env block over `settings` (the section's) as `env_kwargs`, and `max_steps`
        when given (the section's, over the stage's own)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(CurriculumStage)}
        fields["env_kwargs"] = {**settings, **self.env}
        if max_steps is not None:
            fields["max_steps"] = max_steps
        return CurriculumStage(**fields)


GRPOStage = checked(_GRPOStage, config=FORBID)


def _lora_options(value: dict[str, Any] | None) -> dict[str, Any] | None:
    from wander.training.lora import lora_config

    lora_config(value)  # unknown fields or bad values fail when params are read, before any stage runs
    return value


LoraOptions = Annotated[dict[str, Any] | None, AfterValidator(_lora_options)]


class TrainingCompute(Section):
    """How a training stage computes, the same keys for SFT and GRPO: processes, precision, CPU threads, LoRA."""

    processes: int = Field(1, ge=1)
    """Training processes of the stage (torch.distributed DDP: gloo on CPU, NCCL on CUDA), started by `torchrun`, or
    by `accelerate launch` with `accelerate_config`; 1 = the stage's own process. Batch sizes are per process, as in
    TRL: the global batch is `per_device_train_batch_size x processes x gradient_accumulation_steps`
    (docs/training.md#several-processes-and-gpus)."""
    accelerate_config: str | None = None
    """An accelerate config file the stage is launched with (CUDA machines only): configs/accelerate/ has multi-GPU
    DDP, DeepSpeed ZeRO-2 and a multi-node example; `processes` is its total process count. Null = torchrun."""

    bf16: bool | None = False
    """bf16 mixed precision (autocast; the weights and optimizer stay float32), generation included: true, false
    (float32), or null = where the hardware computes bf16 (a CUDA GPU that has it, a CPU with AVX-512 BF16 or AMX:
    wander/policies/precision.py; the chat profiles' choice, measured: docs/experiments/chat-model.md)."""
    torch_threads: int = Field(0, ge=0)
    """CPU threads for torch; 0 keeps torch's default."""
    model_init_kwargs: dict[str, Any] | None = None
    """TRL's `model_init_kwargs`: keyword arguments of the trained model's `from_pretrained`, e.g.
    `{attn_implementation: eager}`; null = transformers' defaults (sdpa attention). Eager on the CPU, measured (SFT
    faster, models worse, so the chat profile keeps sdpa): docs/experiments/chat-model.md#eager-attention-on-the-cpu."""
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
    min_example_repeats: int | None = Field(None, ge=1)
    """Each distinct conversation SFT trains on at least this often: as often as the games hold it, topped up where
    they hold it fewer times (a tree of games, synthesize's `mode: tree`, holds an opening once per leaf below it and
    a late position once); null: as the games hold it. Why the chat profile's: docs/experiments/chat-model.md."""


def stage_models(models: str, stages: Iterable[str]) -> dict[str, str]:
    """The model of each curriculum stage, evaluation row -> folder, in training order: `grpo-<name>` ->
    `<models>/grpo/<name>` (the grpo stage's one DVC output, `<models>/grpo`)."""
    return {f"grpo-{name}": f"{models}/grpo/{name}" for name in stages}


class GRPO(TrainingCompute):
    """The grpo stage: the env's curriculum of GRPO runs, one after another, each from the previous one's model.
    Keys named like `GRPOConfig` fields go to the trainer config."""

    start: str = "sft"
    """Model folder under `layout.models` the first curriculum stage trains from (the retrain flow: the champion)."""
    stages: dict[str, GRPOStage] | None = Field(None, min_length=1)
    """The curriculum: stages in training order, name -> `CurriculumStage` fields (wander/training/
    curriculum_config.py) and the stage's `env` settings; each trains from the previous one's model into
    `<layout.models>/grpo/<name>`, evaluated as row `grpo-<name>`. Null = the env's recipe (its own stages: why
    tic-tac-toe's three, docs/experiments/defaults.md#grpo); set, it replaces the env's curriculum whole."""
    max_steps: int | None = Field(None, ge=1)
    """Optimizer steps of every curriculum stage; null = each stage's own (a short profile sets one number)."""
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
    until_unbeaten: bool = False
    """End a stage at the first learning-curve point where no line beats the model (the env's `LosingLines`: an
    opponent that knows its every move wins on no side), else at its step budget; needs `curve_every`."""
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
    branch_at: Literal["depth", "mistake", "adversary", "token"] = RolloutConfig.branch_at
    """Decision rollouts: each group answers the position after a seeded prefix of sampled turns ("depth"), or
    where the model, greedy, loses the most reward by its own reply ("mistake"), first on the lines that beat it
    ("adversary": the env's `LosingLines`); a single-turn env's groups differ at one token of the greedy reply, the
    one the model is least sure of ("token") (`RolloutConfig.branch_at`)."""
    tool_protocol: Literal["environment_factory", "rollout_func"] = RolloutConfig.tool_protocol
    """A tool env's rollouts: through TRL's tool loop, the tools rendered by the model's chat template
    ("environment_factory"), or the env's own text protocol, as its SFT data and evaluation play it ("rollout_func")
    (`RolloutConfig.tool_protocol`). params.yaml sets "rollout_func" (why: docs/experiments/defaults.md#grpo)."""
    vllm_mode: Literal["server", "colocate"] | None = None
    """Generation through vLLM (TRL's `use_vllm`, GPU machines with `make vllm`): "server" = TRL's vLLM server
    (`trl vllm-serve`) on GPUs of its own at `vllm_server_base_url`, the weights sent to it over NCCL after each step
    (CUDA only: preflight refuses it on CPU); "colocate" = vLLM inside each training process; null = each process
    generates with transformers (docs/training.md#several-processes-and-gpus)."""
    vllm_server_base_url: str | None = None
    """The server of `vllm_mode: server`, e.g. http://10.0.0.5:8000; null = TRL's default (port 8000 here)."""
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

    def curriculum(self, settings: dict[str, Any]) -> dict[str, CurriculumStage]:
        """The library's stages by name, in order, for an env whose section block is `settings`."""
        return {k: s.curriculum_stage(settings, self.max_steps) for k, s in (self.stages or {}).items()}

    def stage_models(self, models: str) -> dict[str, str]:
        """Each curriculum stage's model, evaluation row -> folder, in training order (`stage_models`)."""
        return stage_models(models, self.stages or {})

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
