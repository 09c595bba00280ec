"""What an evaluation plays: the policies (rows), the env's suite columns, games per cell, decoding, outputs.

The one definition of these settings and their defaults: `wander eval`, `wander compare` and the pipeline's
evaluate stage (whose params section is this class) all read it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.dataclasses import dataclass as checked

from wander.core.parse_lock import serialize_ast_parse
from wander.policies.loading import is_scripted_name
from wander.policies.vllm_server_config import VLLMServerConfig

serialize_ast_parse()  # use_attribute_docstrings parses this module's source, maybe beside a Prefect thread's parse

VLLMServer = checked(VLLMServerConfig, config=ConfigDict(extra="forbid"))
"""`VLLMServerConfig` with unknown keys refused, as a config field."""


class EvaluateConfig(BaseModel):
    """The evaluation matrix: rows are policies, columns the env's suite (tic-tac-toe: opponents x who starts;
    others: difficulty strata x splits); every cell plays the same frozen games (seeded by `seed` alone). The env's
    settings (board text, turn limit) are the `env` section's."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    policies: dict[str, str] = Field(default_factory=lambda: {"teacher": "teacher"}, min_length=1)
    """Row name -> policy spec (scripted player, model folder, hub id or OpenAI-compatible URL), in row order;
    `teacher` is the env's embedded teacher at its default slip rate (tic-tac-toe: expert-0.5)."""
    references: list[str] | None = None
    """Scripted rows after `policies` (row name = spec); null = the env's `reference_policies` (tic-tac-toe:
    minimax, random; others: expert, the teacher without slips); [] = none."""
    opponents: list[str] | None = Field(None, min_length=1)
    """Column groups, weakest first (tic-tac-toe: `random` or `minimax-<random-move probability>`; others:
    `stratum-<k>`); null = the env's own (`evaluation_suite().groups`), checked by the env when the stage
    runs."""
    games: int | None = Field(None, ge=1)
    """Games per cell (opponent x side); null = the env's (`suite_games()`: the most episodes every cell of its
    splits holds, at most 200; tic-tac-toe 200), resolved by `wander.core.pipeline_hooks.games_per_cell` when the env is
    built. The 95% interval is about +-0.14 at 50 games."""
    seed: int = 0
    """Seed of the frozen suite and of the policies."""
    temperature: float = Field(0.0, ge=0.0)
    """0 = greedy decoding; above 0 samples."""
    samples: int = Field(1, ge=1)
    """Times each item (episode spec) is played per policy row, sample `j` with a policy seed derived from `seed`
    (sample 0: `seed` itself); above 1 the report adds pass@1, pass@k and avg@k over the items (docs/evaluation.md)
    and needs temperature > 0. 1 = each item once."""
    pass_threshold: float | None = None
    """An episode passes (pass@k) when its value of the suite's headline metric reaches this (at most this for a
    lower-is-better one); null = the headline's best value: 1 for a rate or ratio, a mean's bound (reverse_text's
    reward: 1, the exact answer)."""
    max_new_tokens: int | None = Field(None, ge=1)
    """Longest model reply per turn, in tokens; null = the env's reply budget (`reply_tokens()`: its longest good
    reply, e.g. tic-tac-toe's 16), resolved by `wander.core.pipeline_hooks.reply_budget` when the env is built."""
    max_batch_size: int | None = Field(512, ge=1)
    """Most conversations per policy call; null sends every live game of a row at once."""
    bf16: bool | None = False
    """Local models generate in bf16 autocast (weights stay float32): true, false (float32), or null = where the
    hardware computes bf16 (a CUDA GPU that has it, a CPU with AVX-512 BF16 or AMX: wander/policies/precision.py)."""
    api_model: str | None = None
    """Model name sent to OpenAI-compatible endpoints; null = the model the endpoint serves (from its /models)."""
    out_dir: str = "data/eval"
    """Folder of the metrics, CSV, plots and report."""
    baseline: str | None = "teacher"
    """Row the report compares the others against; null = the first row."""
    progress: bool = False
    """Show a progress bar per policy (stderr)."""
    vllm_rows: list[str] = Field(default_factory=list)
    """Rows (model folders or hub ids) played through vLLM instead of transformers: the stage serves each one with
    vLLM (`make vllm`) on a loopback port for its games, then stops it. Empty: no vLLM."""
    vllm: VLLMServer = Field(default_factory=VLLMServer)
    """How those servers start (wander/policies/vllm_server_config.py): vLLM's venv, dtype, context, KV cache."""

    @field_validator("opponents")
    @classmethod
    def _distinct_opponents(cls, value: list[str] | None) -> list[str] | None:
        # Which names exist is the env's to say (`check_suite_groups`), when the stage has loaded it.
        if value is not None and len(set(value)) != len(value):
            raise ValueError(f"opponents {value} repeat a name; list each opponent once")
        return value

    @model_validator(mode="after")
    def _vllm_rows_are_models(self) -> EvaluateConfig:
        for name in self.vllm_rows:
            spec = self.policies.get(name)
            if spec is None:
                raise ValueError(
                    f"vllm_rows names {name!r}, not a policy row; rows are {list(self.policies)}"
                )
            if is_scripted_name(spec) or spec.startswith(("http://", "https://")):
                raise ValueError(
                    f"vllm_rows: row {name!r} is {spec!r}, not a model folder or hub id vLLM can serve"
                )
        return self

    @model_validator(mode="after")
    def _baseline_is_a_row(self) -> EvaluateConfig:
        if self.baseline is not None and self.baseline not in self.policies:
            raise ValueError(
                f"baseline {self.baseline!r} is not a policy row; rows are {list(self.policies)}"
            )
        if not math.isfinite(self.temperature):
            raise ValueError("temperature must be finite")
        return self

    @model_validator(mode="after")
    def _samples_need_sampling(self) -> EvaluateConfig:
        # Greedy decoding answers each item the same way every time: k samples would be one sample k times.
        if self.samples > 1 and self.temperature == 0:
            raise ValueError(
                f"samples {self.samples} plays each item {self.samples} times, but temperature 0 decodes greedily, "
                "so every sample of a model row would be the same: set temperature above 0 (e.g. 1.0) to sample, "
                "or samples 1"
            )
        if self.pass_threshold is not None and not math.isfinite(self.pass_threshold):
            raise ValueError("pass_threshold must be finite, or null for the headline metric's best value")
        return self

    def rows(self, reference_policies: Sequence[str]) -> dict[str, str]:
        """Every row, name -> spec: `policies`, then the references (the env's `reference_policies` when null)."""
        references = reference_policies if self.references is None else self.references
        return {**self.policies, **{name: name for name in references if name not in self.policies}}

    @property
    def decoding(self) -> str:
        """How models pick tokens, as reports say it."""
        return "greedy" if self.temperature == 0 else f"sampled (temperature {self.temperature:g})"
