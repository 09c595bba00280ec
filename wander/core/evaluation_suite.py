"""An environment's evaluation suite as data: its columns, its metrics, its headline and the report's wording.

`env.evaluation_suite()` returns an `EvaluationSuite`; the evaluation code (`wander/eval/`) reads every metric's
direction, kind and per-episode value from it and never knows a metric by name. The default (`rubric_suite`) is
the rubric's means per difficulty stratum and split; a game declares its own (tic-tac-toe: envs/tictactoe/suite.py).

A metric is one of three kinds, which decide how a cell of episodes becomes a number with a 95% interval:

- `RATE`: 0 or 1 per episode; the cell keeps the count of ones (`count`) and gets a Wilson interval from it,
  so cells pool exactly.
- `RATIO`: successes over trials summed over a cell's episodes (tic-tac-toe: value-keeping moves over moves); the
  cell keeps both counts and gets a Wilson interval.
- `MEAN`: a number per episode; the cell gets `stats.mean_ci`'s interval and, with `spread`, keeps the standard
  deviation (`<name>_sd`) so pooled cells get a normal interval too.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from wander.core.episode import Episode

RATE, RATIO, MEAN = "rate", "ratio", "mean"
KINDS = (RATE, RATIO, MEAN)
# Suite kinds: which report writes the outputs. "rubric": means per difficulty stratum and split
# (wander/eval/rubric_report.py); "matrix": a game's opponent matrix (wander/eval/matrix_report.py).
RUBRIC, MATRIX = "rubric", "matrix"
SUITE_KINDS = (RUBRIC, MATRIX)

EpisodeValue = Callable[[Episode], float]


@dataclass(frozen=True)
class Metric:
    """One number per cell of the suite: its name in the rows, its kind, its direction and how it is read."""

    name: str
    kind: str = MEAN
    lower_is_better: bool = False
    label: str = ""
    """What the report calls it (default: the name)."""
    short: str = ""
    """The terminal table's column header (default: the label)."""
    digits: int = 3
    """Decimals the report shows."""
    plain: bool = False
    """The report shows the value alone, right-aligned (a count such as turns), not with its interval."""
    read: EpisodeValue | None = None
    """Per episode: a MEAN's value, a RATE's 1 or 0, a RATIO's successes; None: the rubric's value (or the reward)."""
    trials: EpisodeValue | None = None
    """RATIO: an episode's trials."""
    count: str = ""
    """RATE, RATIO: the row column that keeps the summed successes (so rows pool exactly)."""
    trials_count: str = ""
    """RATIO: the row column that keeps the summed trials."""
    failures: str = ""
    """A RATE without a count of its own: its successes are the episodes not counted in this other RATE's count
    column (tic-tac-toe's non-loss: the games not in `losses`)."""
    spread: bool = True
    """MEAN: rows keep `<name>_sd`, so pooled cells get an interval; False: pooled cells are a weighted mean only."""
    bounds: tuple[float, float] | None = None
    """MEAN: the range every value lies in (a share: (0, 1); a count such as side effects: (0, math.inf)); its normal
    interval is clipped to it. None: unbounded."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"metric {self.name!r}: kind {self.kind!r} is not one of {KINDS}")
        if self.kind == RATE and bool(self.count) == bool(self.failures):
            raise ValueError(
                f"rate {self.name!r} needs either `count` (its row column) or `failures`, not both"
            )
        if self.kind == RATIO and not (self.read and self.trials and self.count and self.trials_count):
            raise ValueError(f"ratio {self.name!r} needs `read`, `trials`, `count` and `trials_count`")

    @property
    def shown(self) -> str:
        """The name the report uses."""
        return self.label or self.name

    @property
    def comparable(self) -> bool:
        """Whether pooled cells have an interval, so two policies can be compared on it."""
        return self.kind != MEAN or self.spread

    def value(self, episode: Episode) -> float:
        """This metric's value for one episode (a RATIO: its successes)."""
        if self.read is not None:
            return self.read(episode)
        return episode.reward if self.name == "reward" else episode.values.get(self.name, 0.0)


@dataclass(frozen=True)
class PlotLabels:
    """What the heatmap and the bar chart say about the headline metric and the columns."""

    title: str
    axis: str
    columns: str
    interval: str
    bar_columns: str
    pooled: str


@dataclass(frozen=True)
class ReportLayout:
    """The report's wording and tables; empty column lists mean every metric, in the suite's order."""

    title: str = "Evaluation suite"
    intro: str = (
        "Columns: difficulty strata {groups} of the {sides} splits, {games} episodes per cell (seed {seed}); "
        "decoding: {decoding}. Intervals are 95% (normal approximation; Wilson for 0/1 metrics per cell)."
    )
    """After the list of policies; fields {groups}, {sides}, {games}, {seed}, {decoding}."""
    group_label: str = "stratum"
    side_label: str = "split"
    side_names: tuple[tuple[str, str], ...] = ()
    """How the plots name each side (tic-tac-toe: first -> "moves first"); unnamed sides show as they are."""
    plot: PlotLabels | None = None
    """None: "Mean <headline>" per difficulty stratum and split."""
    summary: tuple[str, ...] = ()
    """Metrics of the summary per policy."""
    cells: tuple[str, ...] = ()
    """Metrics of the table of every cell."""
    terminal: tuple[str, ...] = ()
    """Metrics of the terminal table (a matrix suite's)."""
    overview: tuple[str, ...] = ()
    """A matrix suite's metrics.json: metrics pooled over each headline row."""
    extremes: tuple[tuple[int, str], ...] = ()
    """A matrix suite's metrics.json: (column group index, metric) cells, e.g. loss against the last group."""
    outcomes: tuple[str, ...] = ()
    """A matrix suite's run summary: the metrics shown per column group for the candidate and the baseline, both
    sides pooled (tic-tac-toe: win, draw, loss); () shows the headline."""
    samples: tuple[tuple[str, Callable[[Episode], bool]], ...] = ()
    """A matrix suite's sample episodes: (what it shows, which episode shows it), the first match of each."""
    sample_title: Callable[[Episode], str] | None = None
    """A sample's heading after its kind (default: its column and seed)."""
    sample_note: Callable[[Episode], str] | None = None
    """A line under a sample's heading (default: its reward)."""


@dataclass(frozen=True)
class EvaluationSuite:
    """The columns (groups x sides), the metrics, the headline and the report of an env's evaluation."""

    metrics: tuple[Metric, ...]
    groups: tuple[str, ...]
    """The default column groups (tic-tac-toe: opponents; default: difficulty strata)."""
    sides: tuple[str, ...] = ("eval", "test")
    """The second level of the columns (tic-tac-toe: who moves first; default: the split)."""
    headline: str = "reward"
    """The metric reports plot and register compares when none is named."""
    kind: str = RUBRIC
    spec_columns: tuple[tuple[str, str], ...] = ()
    """(row column, spec key): a spec value every row keeps, from the cell's first episode."""
    report: ReportLayout = field(default_factory=ReportLayout)
    curve_series: tuple[tuple[str, str], ...] = ()
    """(learning-curve key, label): the series the learning-curve plot shows (keys of `curve_metrics`); () plots
    every key the curves have."""

    def __post_init__(self) -> None:
        names = self.names
        if len(set(names)) != len(names):
            raise ValueError(f"an evaluation suite names each metric once: {list(names)}")
        if self.kind not in SUITE_KINDS:
            raise ValueError(f"suite kind {self.kind!r} is not one of {SUITE_KINDS}")
        report = self.report
        named = [
            self.headline,
            *report.summary,
            *report.cells,
            *report.terminal,
            *report.overview,
            *report.outcomes,
        ]
        unknown = [n for n in [*named, *(m for _, m in report.extremes)] if n not in names]
        if unknown:
            raise ValueError(
                f"the suite names metrics it does not have: {unknown}; its metrics are {list(names)}"
            )
        counts = {m.count for m in self.metrics if m.count}
        for m in self.metrics:
            if m.failures and m.failures not in counts:
                raise ValueError(
                    f"rate {m.name!r} counts failures in {m.failures!r}, no metric's count column"
                )
        self.comparable(self.headline)

    @property
    def names(self) -> tuple[str, ...]:
        """Every metric's name, in row order."""
        return tuple(m.name for m in self.metrics)

    def metric(self, name: str) -> Metric:
        """The metric called `name` (ValueError naming the suite's metrics when there is none)."""
        for m in self.metrics:
            if m.name == name:
                return m
        raise ValueError(
            f"the evaluation suite has no metric {name!r}; its metrics are {', '.join(self.names)}"
        )

    def comparable(self, name: str) -> Metric:
        """The metric called `name`, when pooled cells have an interval to compare (ValueError naming those)."""
        metric = self.metric(name)
        if not metric.comparable:
            choices = ", ".join(m.name for m in self.metrics if m.comparable)
            raise ValueError(
                f"cannot compare on {name!r}: its pooled cells have no interval; choose one of {choices}"
            )
        return metric

    def columns(self, table: str) -> tuple[Metric, ...]:
        """The metrics of a report table ("summary", "cells", "terminal"): every metric when it lists none."""
        names = getattr(self.report, table) or self.names
        return tuple(self.metric(n) for n in names)

    @property
    def plot_labels(self) -> PlotLabels:
        """The plots' wording: the report's, or the mean of the headline per stratum and split."""
        return self.report.plot or PlotLabels(
            title=f"Mean {self.headline}",
            axis=f"mean {self.headline}",
            columns="difficulty stratum; split",
            interval="95% interval",
            bar_columns="stratum",
            pooled="all splits",
        )

    def side_name(self, side: str) -> str:
        """How the plots name a side."""
        return dict(self.report.side_names).get(side, side)

    def lower_is_better(self, *names: str) -> EvaluationSuite:
        """This suite with the named metrics judged lower-is-better (side effects, tool errors)."""
        return self._with(names, lower_is_better=True)

    def bounded(self, low: float, high: float, *names: str) -> EvaluationSuite:
        """This suite with the named metrics (default: all) known to lie in [low, high], so their intervals do."""
        return self._with(names or self.names, bounds=(low, high))

    def _with(self, names: tuple[str, ...], **change: object) -> EvaluationSuite:
        missing = [n for n in names if n not in self.names]
        if missing:
            raise ValueError(
                f"the evaluation suite has no metric {missing}; its metrics are {list(self.names)}"
            )
        metrics = tuple(dataclasses.replace(m, **change) if m.name in names else m for m in self.metrics)
        return dataclasses.replace(self, metrics=metrics)


def rubric_suite(names: tuple[str, ...], strata: int, headline: str = "reward") -> EvaluationSuite:
    """The default suite: each rubric metric's mean (reward first) per difficulty stratum of the eval and test
    splits."""
    return EvaluationSuite(
        metrics=tuple(Metric(name) for name in names),
        groups=tuple(f"stratum-{k}" for k in range(strata)),
        headline=headline,
    )


def cell_seeds(seed: int, group: str, side: str, games: int, seed_range: tuple[int, int]) -> list[int]:
    """The episode seeds of one cell of a frozen matrix suite (a game's opponents x sides): `games` distinct seeds of
    `seed_range`, from a stream of the cell's own, so the other groups never shift a cell's seeds."""
    return random.Random(f"wander-eval:{seed}:{group}:{side}").sample(range(*seed_range), games)


def matrix_suite_specs(
    make_spec: Callable[[int], dict],
    cells: Iterable[tuple[str, str, dict]],
    games: int,
    seed: int,
    seed_range: tuple[int, int],
) -> list[dict]:
    """A game's frozen suite, cell after cell: for each (group, side, the cell's spec fields), `games` specs made from
    `cell_seeds`, without the split's difficulty stratum (the cell sets the opponent), with the cell's fields and
    its `opponent` and `side`."""
    specs = []
    for group, side, fields in cells:
        for s in cell_seeds(seed, group, side, games, seed_range):
            spec = make_spec(s)
            spec.pop("stratum", None)
            spec.update(fields, opponent=group, side=side)
            specs.append(spec)
    return specs
