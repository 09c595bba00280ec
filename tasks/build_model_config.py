"""Settings of the build_model stage: the base policy every training stage starts from."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from envs.policies.scratch_model_config import ScratchModelConfig

SCRATCH = "scratch"


@dataclass
class BuildModelConfig:
    r"""
    Configuration for [`tasks.build_model.run`]: the base policy, written to `output_dir`.

    Parameters:
        model (`str`, *optional*, defaults to `"scratch"`):
            `"scratch"` builds a tiny Llama with a byte-level BPE tokenizer trained on every string the environment
            can show (`env.corpus()`): nothing is downloaded. Anything else is a Hugging Face model id or a local
            model folder, loaded with transformers (from the local cache when offline) and copied to `output_dir`,
            with its origin recorded in `wander_model.json`.
        scratch (`ScratchModelConfig`, *optional*):
            Tokenizer and model sizes of the scratch model (vocab_size, hidden_size, num_hidden_layers, ...,
            seed); see `envs/policies/scratch_model_config.py`. Ignored for other models.
        env (`dict[str, Any]`, *optional*, defaults to the `env` section):
            The environment whose corpus trains the scratch tokenizer: `name` plus the env's settings.
        output_dir (`str`, *optional*, defaults to `layout.base_model`):
            Folder of the model and tokenizer (replaced whole, atomically).
        metrics_dir (`str`, *optional*, defaults to `layout.metrics`):
            Folder of the stage's metrics file, `build_model.json`.
    """

    model: str = field(
        default=SCRATCH, metadata={"help": "'scratch', or a hub model id or local model folder."}
    )
    scratch: ScratchModelConfig = field(
        default_factory=ScratchModelConfig, metadata={"help": "Sizes of the scratch tokenizer and model."}
    )
    env: dict[str, Any] = field(
        default_factory=lambda: {"name": "tictactoe"},
        metadata={"help": "Environment whose corpus trains the scratch tokenizer.", "from": "env"},
    )
    output_dir: str = field(
        default="data/models/base", metadata={"help": "Model folder.", "from": "layout.base_model"}
    )
    metrics_dir: str = field(
        default="data/metrics", metadata={"help": "Folder of build_model.json.", "from": "layout.metrics"}
    )

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("model must be 'scratch', a hub model id or a local model folder")
        if "name" not in self.env:
            raise ValueError("env needs a 'name' (e.g. tictactoe)")

    def to_dict(self) -> dict:
        """The config as a plain dict (for MLflow params)."""
        return asdict(self)
