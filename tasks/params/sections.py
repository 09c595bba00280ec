"""The params model's root: `Params`, the whole params.yaml, one field per section, and `READS`, the sections each
stage reads. Each section is one class, with each key's type, rules, default and one-line meaning: `layout` and
`env` in shared_sections.py, the data stages' in data_sections.py, `sft` and `grpo` in training_sections.py,
`evaluate` and `register` in evaluation_sections.py. Why a default is what it is: docs/experiments/defaults.md.

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
Adding a key is one line in its section's class and its value in params.yaml.
"""

from __future__ import annotations

import warnings
from typing import Any

from pydantic import Field, ValidationError, model_validator

from tasks.params.data_sections import BuildModel, Curate, Generate, Synthesize
from tasks.params.evaluation_sections import Evaluate, Register
from tasks.params.section_base import Section
from tasks.params.shared_sections import Env, Layout
from tasks.params.training_sections import GRPO, SFT, stage_models

with warnings.catch_warnings():
    # `register` shadows ABCMeta.register (a class method nobody calls on params); the field is what we mean.
    warnings.filterwarnings("ignore", message='Field name "register"')

    class Params(Section):
        """The whole params.yaml. A missing section or key takes its section's default."""

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

        @model_validator(mode="before")
        @classmethod
        def _follow_the_curriculum(cls, data: Any) -> Any:
            # The rows, lineage and candidate left null follow the curriculum (the env's, once its recipe filled
            # it): another env's stages are other rows, with no key of params.yaml to edit. Filled before the
            # sections are checked, so `evaluate`'s own rules (baseline and vLLM rows among the rows) see them.
            stages = (data.get("grpo") or {}).get("stages") if isinstance(data, dict) else None
            if not isinstance(stages, dict) or not stages:
                return data  # no curriculum (yet): nothing to follow; a bad value is the grpo section's to report
            try:
                layout = Layout.model_validate(data.get("layout") or {})
            except ValidationError:
                return data  # the layout section reports it
            models = layout.models
            lineage = {"base": layout.base_model, "sft": f"{models}/sft", **stage_models(models, stages)}
            data = dict(data)
            evaluate, register = dict(data.get("evaluate") or {}), dict(data.get("register") or {})
            if evaluate.get("policies") is None:
                evaluate["policies"] = {**lineage, "teacher": "teacher"}
            if register.get("lineage") is None:
                register["lineage"] = lineage
            if register.get("candidate") is None:
                register["candidate"] = list(lineage)[-1]
            return {**data, "evaluate": evaluate, "register": register}

        def registered_model_name(self) -> str:
            """The registry's model name: `register.model_name`, null = `wander-<env.name>` (one per environment)."""
            return self.register.model_name or f"wander-{self.env.name}"


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
