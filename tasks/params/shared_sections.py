"""The sections every stage reads: `layout` (where the pipeline's files live) and `env` (the environment it
plays)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ConfigDict, field_validator, model_validator

from tasks.params.section_base import Section
from wander.core.logs import redact_url
from wander.core.registry import DEFAULT_ENV


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
    """Trained checkpoints: sft, grpo/<curriculum stage>."""
    eval: str = "data/eval"
    """The evaluation matrix, report and plots."""
    work: str = "data/work"
    """Resumable state kept across runs (synthesis journal, checkpoints); never a DVC output."""


class Env(Section):
    """The environment every stage plays: `name`, `url`, and one block of settings per environment (`env.<name>`:
    for tic-tac-toe the fields of `TicTacToeConfig`, checked by `tasks.params.load.check_env`). Stages read the block of
    `name`; an environment without a block plays its defaults, so `dvc exp run -S env.name=<other>` is enough.
    No block by default: every setting is the env's own. params.yaml tunes two for the pipeline, tic-tac-toe's
    `midgame_starts` and the other envs' `num_groups` (why: docs/experiments/defaults.md#envtictactoe)."""

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
