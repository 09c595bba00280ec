"""Settings of the evaluate stage: which policies play which opponents, how many games, where reports go."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from envs.tictactoe.players import opponent_skill

DEFAULT_OPPONENTS = ["random", "minimax-0.75", "minimax-0.5", "minimax-0.25", "minimax-0"]


@dataclass
class EvaluateConfig:
    r"""
    Configuration for [`tasks.evaluate.run`]: the opponent matrix of tic-tac-toe.

    Rows are policies, columns are opponents split by who moves first. Every cell plays `games` episodes whose seeds
    are fixed by `seed` alone (the frozen suite), so every policy meets exactly the same games and a rerun with greedy
    decoding gives the same matrix.

    Parameters:
        > Parameters that control what plays

        policies (`dict[str, str]`, *optional*, defaults to `{"random": "random", "minimax": "minimax"}`):
            Row name -> policy spec, in the order the rows are shown (put a lineage in training order). A spec is
            anything `envs.policies.loading.make_policy` takes: a scripted player (`random`, `minimax-0.25`,
            `expert`), a local model folder, a hub id, or the base URL of an OpenAI-compatible endpoint.
        opponents (`list[str]`, *optional*, defaults to `["random", "minimax-0.75", "minimax-0.5", "minimax-0.25",
        "minimax-0"]`):
            Column opponents, weakest first: `random` (random-move probability 1) or `minimax-<p>` (a random move with
            probability p, else a minimax move).
        games (`int`, *optional*, defaults to `50`):
            Games per cell (one opponent, one side). The 95% Wilson interval of a rate is about +-0.14 at 50 games
            and +-0.07 at 200.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the frozen suite (episode seeds of every cell) and of the policies (scripted players, sampling).

        > Parameters that control decoding

        temperature (`float`, *optional*, defaults to `0.0`):
            0 is greedy decoding; above 0 samples at that temperature. Reports say which. Scripted players ignore it.
        max_new_tokens (`int`, *optional*, defaults to `64`):
            Longest reply of a model per turn.
        max_batch_size (`int` or `None`, *optional*, defaults to `None`):
            Most conversations per policy call; `None` sends every live game of a row at once.
        api_model (`str`, *optional*, defaults to `"teacher"`):
            Model name sent to OpenAI-compatible endpoints.

        > Parameters that control the games

        rendering (`str`, *optional*, defaults to `"compact"`):
            Board text shown to the policy: `"compact"` (what the scratch model is trained on) or `"grid"`.
        max_turns (`int`, *optional*, defaults to `8`):
            Model turns per game, invalid ones included; a game still running after them is a loss.

        > Parameters that control the outputs

        out_dir (`str`, *optional*, defaults to `"data/eval"`):
            Folder of the metrics JSON, tidy CSV, plots and Markdown report.
        baseline (`str` or `None`, *optional*, defaults to `None`):
            Row the report compares every other row against; `None` means the first row.
        progress (`bool`, *optional*, defaults to `True`):
            Show a progress bar per policy (on stderr).
    """

    policies: dict[str, str] = field(
        default_factory=lambda: {"random": "random", "minimax": "minimax"},
        metadata={"help": "Row name -> policy spec (scripted player, model folder, hub id or URL)."},
    )
    opponents: list[str] = field(
        default_factory=lambda: list(DEFAULT_OPPONENTS), metadata={"help": "Column opponents, weakest first."}
    )
    games: int = field(default=50, metadata={"help": "Games per cell (opponent x side)."})
    seed: int = field(default=0, metadata={"help": "Seed of the frozen suite and of the policies."})
    temperature: float = field(default=0.0, metadata={"help": "0 = greedy decoding, > 0 = sampled."})
    max_new_tokens: int = field(default=64, metadata={"help": "Longest model reply per turn."})
    max_batch_size: int | None = field(default=None, metadata={"help": "Most conversations per policy call."})
    api_model: str = field(
        default="teacher", metadata={"help": "Model name for OpenAI-compatible endpoints."}
    )
    rendering: str = field(default="compact", metadata={"help": "Board text: compact or grid."})
    max_turns: int = field(default=8, metadata={"help": "Model turns per game, invalid ones included."})
    out_dir: str = field(default="data/eval", metadata={"help": "Folder of every output."})
    baseline: str | None = field(default=None, metadata={"help": "Row the report compares against."})
    progress: bool = field(default=True, metadata={"help": "Show a progress bar per policy."})

    def __post_init__(self) -> None:
        if not self.policies:
            raise ValueError("no policies to evaluate; give at least one, e.g. {'minimax': 'minimax'}")
        if not self.opponents:
            raise ValueError(f"no opponents; give at least one, e.g. {DEFAULT_OPPONENTS}")
        if len(set(self.opponents)) != len(self.opponents):
            raise ValueError(f"opponents {self.opponents} repeat a name; list each opponent once")
        for name in self.opponents:
            opponent_skill(name)  # raises with the accepted names
        if self.games < 1:
            raise ValueError(f"games must be at least 1 per cell, got {self.games}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"temperature must be 0 (greedy) or positive, got {self.temperature}")
        if self.max_new_tokens < 1 or self.max_turns < 1:
            raise ValueError("max_new_tokens and max_turns must be at least 1")
        if self.max_batch_size is not None and self.max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1 or None, got {self.max_batch_size}")
        if self.baseline is not None and self.baseline not in self.policies:
            raise ValueError(
                f"baseline {self.baseline!r} is not a policy row; rows are {list(self.policies)}"
            )

    @property
    def decoding(self) -> str:
        """How models pick tokens, as reports say it."""
        return "greedy" if self.temperature == 0 else f"sampled (temperature {self.temperature:g})"

    def to_dict(self) -> dict:
        """The config as a plain dict (for params files and MLflow)."""
        return asdict(self)


def parse_policies(items: list[str]) -> dict[str, str]:
    """Row names for policy specs: `name=spec`, or the spec's own short name (a folder's last part)."""
    policies: dict[str, str] = {}
    for item in items:
        name, sep, spec = item.partition("=")
        # A URL's query string may hold '='; only a plain word before it is a row name.
        if not sep or not name or any(c in name for c in "/:"):
            spec = item
            name = item if item.startswith(("http://", "https://")) else Path(item.rstrip("/")).name or item
        if not spec:
            raise ValueError(f"policy {item!r} has an empty spec; write NAME=SPEC or just SPEC")
        if name in policies:
            raise ValueError(
                f"two policies are named {name!r}; give them distinct row names with NAME=SPEC, e.g. sft={spec}"
            )
        policies[name] = spec
    return policies
