"""What a played evaluation matrix holds: its tidy rows and episodes, and how it was played as the reports state
it (rows, column groups, games per cell, decoding, seed, baseline).

`wander.eval.matrix` plays it; the reports, plots and the episodes file read it alone, never the config.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from wander.core.episode import Episode
from wander.core.evaluation_suite import EvaluationSuite


@dataclass
class MatrixResult:
    """Tidy rows (one per policy x opponent x side), the episodes behind them, timings, and the settings the
    reports state."""

    rows: list[dict]
    episodes: dict[str, list[Episode]]
    policies: dict[str, str]
    opponents: list[str]
    games: int  # per cell
    decoding: str  # how model rows pick tokens, as reports say it
    seed: int  # of the frozen suite and of the policies
    baseline: str  # the row the report compares the others against
    suite: EvaluationSuite  # the env's: columns, metrics, headline, report
    render: Callable[[Episode], str] | None = None  # the env's render_episode, for sample episodes
    seconds: dict[str, float] = field(default_factory=dict)
    # policy -> opponent -> exact expected metrics, both sides pooled (greedy rows of an ExactEvaluation env)
    exact: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    exact_note: str = ""  # the env's, for the report
    exact_columns: tuple[tuple[str, str], ...] = ()  # (result key, label): the report's exact table
    # policy -> side -> the outcome against an opponent that knows the policy, and its line (a WorstCase env)
    worst: dict[str, dict[str, dict]] = field(default_factory=dict)
    worst_lines: Callable[[dict[str, dict[str, dict]]], list[str]] | None = None  # the env's report section
    # (stage, points) of the GRPO learning curves found in the rows' model folders, in row order
    curves: list[tuple[str, list[dict]]] = field(default_factory=list)
    samples: int = 1  # times each item was played per row (pass@k, wander/eval/pass_at_k.py)
    pass_threshold: float | None = None  # the config's: null = the headline metric's best value
    resumed: int = 0  # episodes restored from the journal instead of played (wander/eval/journal.py)

    @property
    def per_cell(self) -> int:
        """Episodes per cell of a row: its items times the samples of each."""
        return self.games * self.samples

    @property
    def sides(self) -> tuple[str, ...]:
        """The second level of the columns."""
        return self.suite.sides

    @property
    def headline(self) -> str:
        """The suite's headline metric."""
        return self.suite.headline

    def row(self, policy: str, opponent: str, side: str) -> dict:
        """The row of one cell."""
        for r in self.rows:
            if (r["policy"], r["opponent"], r["side"]) == (policy, opponent, side):
                return r
        raise KeyError(f"no cell {policy!r} x {opponent!r} ({side}); rows: {list(self.policies)}")
