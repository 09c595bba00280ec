"""The evaluation matrix: policies (rows) against the env's suite columns (group x side), on a frozen suite.

The env says what its columns are (`wander.core.suite.PipelineHooks`): a game's opponents x who moves first
(`evaluation_suite = "matrix"`: win/draw/loss rates from counts) or difficulty strata x splits (`"rubric"`: rubric
means with normal intervals). Row fields keep the names `opponent` (the column group) and `side`.

Every cell is a fixed list of episode specs from the suite seed, the same for every policy, so rows are
comparable and greedy reruns are identical. All games of one policy go through one batched rollout, so a local
model answers every live game of every cell in one `generate` call per turn.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.core.policy import Conversation, Policy, Reply
from wander.core.registry import DEFAULT_ENV, load_environment
from wander.core.stats import Z95, mean_ci, wilson_interval
from wander.eval.config import EvaluateConfig
from wander.policies.loading import make_policy
from wander.policies.vllm_server import VLLMServer

logger = logging.getLogger(__name__)
# Rates with a Wilson interval, each from a count of successes out of games (or moves, for optimality).
RATES = ("win", "draw", "loss", "non_loss", "invalid", "move_optimality")
MEANS = ("format", "turns")  # per-game means with a normal interval


@dataclass
class MatrixResult:
    """Tidy rows (one per policy x opponent x side), the episodes behind them, and timings."""

    rows: list[dict]
    episodes: dict[str, list[Episode]]
    policies: dict[str, str]
    opponents: list[str]
    games: int
    decoding: str
    sides: tuple[str, ...] = ("first", "second")  # the second level of the columns (the env's suite_sides)
    suite: str = "matrix"  # the env's evaluation_suite: which report writes the outputs
    headline: str = "non_loss"  # the env's headline metric
    render: Callable[[Episode], str] | None = None  # the env's render_episode, for sample episodes
    exact_note: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    # policy -> opponent -> exact expected rates, both sides pooled (greedy local models only)
    exact: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    # policy -> side -> the outcome against an opponent that knows the policy, and its line (greedy local models)
    worst: dict[str, dict[str, dict]] = field(default_factory=dict)
    # (stage, points) of the GRPO learning curves found in the rows' model folders, in row order
    curves: list[tuple[str, list[dict]]] = field(default_factory=list)

    def row(self, policy: str, opponent: str, side: str) -> dict:
        """The row of one cell."""
        for r in self.rows:
            if (r["policy"], r["opponent"], r["side"]) == (policy, opponent, side):
                return r
        raise KeyError(f"no cell {policy!r} x {opponent!r} ({side}); rows: {list(self.policies)}")


class MatrixInterrupted(RuntimeError):
    """A matrix that stopped at one policy row: `partial` holds the rows that finished before it."""

    def __init__(self, partial: MatrixResult, row: str, cause: BaseException) -> None:
        self.partial, self.row, self.cause = partial, row, cause
        self.saved_to: str | None = None  # where the finished rows were written, once they are
        super().__init__(f"policy row {row!r} failed: {cause}")

    def __str__(self) -> str:
        message = super().__str__()
        if self.saved_to is None:
            return message
        finished = ", ".join(self.partial.policies)
        return f"{message}; the rows that finished ({finished}) are written to {self.saved_to}/"


def counts(rows: Sequence[dict], metric: str) -> tuple[int, int]:
    """Successes and trials of a rate, summed over rows (exact: rows keep their counts)."""
    if metric == "move_optimality":
        return sum(r["optimal_moves"] for r in rows), sum(r["moves"] for r in rows)
    key = {"win": "wins", "draw": "draws", "loss": "losses", "invalid": "invalid_games"}.get(metric)
    games = sum(r["games"] for r in rows)
    if metric == "non_loss":
        return games - sum(r["losses"] for r in rows), games
    if key is None:
        raise ValueError(f"{metric!r} is not a rate; choose one of {RATES}")
    return sum(r[key] for r in rows), games


def pooled(rows: Sequence[dict], metric: str) -> dict[str, float]:
    """A metric pooled over rows (e.g. both sides, or a whole row of the matrix) with its 95% interval: a game
    rate from its counts (Wilson), a rubric mean from each row's mean, spread and games (normal)."""
    if rows and f"{metric}_sd" in rows[0]:
        return pooled_mean(rows, metric)
    successes, n = counts(rows, metric)
    low, high = wilson_interval(successes, n)
    if not n:
        return {"mean": float("nan"), "ci_low": low, "ci_high": high, "n": 0}
    return {"mean": successes / n, "ci_low": low, "ci_high": high, "n": n}


def summary(rows: Sequence[dict]) -> dict[str, float]:
    """Flat metrics of a group of cells: pooled rates with intervals, game-weighted format and turns."""
    out: dict[str, float] = {"games": sum(r["games"] for r in rows)}
    for metric in RATES:
        stats = pooled(rows, metric)
        out.update(
            {
                metric: stats["mean"],
                f"{metric}_ci_low": stats["ci_low"],
                f"{metric}_ci_high": stats["ci_high"],
            }
        )
    for metric in MEANS:
        out[metric] = sum(r[metric] * r["games"] for r in rows) / out["games"]
    return out


def pooled_mean(rows: Sequence[dict], metric: str) -> dict[str, float]:
    """A rubric mean pooled over rows, its variance rebuilt from each row's mean, spread and size."""
    n = sum(r["games"] for r in rows)
    if not n:
        return {"mean": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"), "n": 0}
    mean = sum(r[metric] * r["games"] for r in rows) / n
    squares = sum(
        (r["games"] - 1) * r[f"{metric}_sd"] ** 2 + r["games"] * (r[metric] - mean) ** 2 for r in rows
    )
    half = Z95 * math.sqrt(squares / (n - 1) / n) if n > 1 else 0.0
    return {"mean": mean, "ci_low": mean - half, "ci_high": mean + half, "n": n}


def rubric_row(
    policy: str, group: str, side: str, decoding: str, episodes: Sequence[Episode], names: Sequence[str]
) -> dict:
    """One tidy row of a rubric suite: games, errors, then each rubric metric's mean, 95% interval and spread."""
    row = {"policy": policy, "opponent": group, "side": side, "decoding": decoding, "games": len(episodes)}
    row["errored"] = sum(ep.error is not None for ep in episodes)
    for metric in names:
        values = [ep.reward if metric == "reward" else ep.values.get(metric, 0.0) for ep in episodes]
        stats = mean_ci(values)
        spread = (
            math.sqrt(sum((v - stats["mean"]) ** 2 for v in values) / (len(values) - 1))
            if len(values) > 1
            else 0.0
        )
        row.update(
            {
                metric: stats["mean"],
                f"{metric}_ci_low": stats["ci_low"],
                f"{metric}_ci_high": stats["ci_high"],
            }
        )
        row[f"{metric}_sd"] = spread
    return row


def cell_row(policy: str, opponent: str, side: str, decoding: str, episodes: Sequence[Episode]) -> dict:
    """One tidy row of a game matrix: counts, then every metric with its 95% interval."""
    outcomes = [ep.state.get("outcome") for ep in episodes]
    row = {
        "policy": policy,
        "opponent": opponent,
        "side": side,
        "opponent_random_move_prob": episodes[0].spec["random_move_prob"],
        "decoding": decoding,
        "games": len(episodes),
        "wins": outcomes.count("win"),
        "draws": outcomes.count("draw"),
        "losses": len(episodes) - outcomes.count("win") - outcomes.count("draw"),  # out of turns is a loss
        "invalid_games": sum(ep.state.get("invalid", 0) > 0 for ep in episodes),
        "moves": sum(ep.state.get("model_moves", 0) for ep in episodes),
        "optimal_moves": sum(ep.state.get("optimal", 0) for ep in episodes),
        "errored": sum(ep.error is not None for ep in episodes),
    }
    for metric in RATES:
        stats = pooled([row], metric)
        row.update(
            {
                metric: stats["mean"],
                f"{metric}_ci_low": stats["ci_low"],
                f"{metric}_ci_high": stats["ci_high"],
            }
        )
    for metric in MEANS:
        stats = mean_ci([ep.values.get(metric, 0.0) for ep in episodes])
        row.update(
            {
                metric: stats["mean"],
                f"{metric}_ci_low": stats["ci_low"],
                f"{metric}_ci_high": stats["ci_high"],
            }
        )
    return row


class _Progress:
    """Wraps a policy to advance a bar of finished games: every live game moves once per round of the rollout.

    Unchunked, each call is a whole round, so games not in it are over; chunked, only games absent from the
    previous whole round are known to be over, so the bar lags one round.
    """

    def __init__(self, policy: Policy, bar: tqdm, chunked: bool):
        self.policy, self.bar, self.chunked = policy, bar, chunked
        self.turn, self.live, self.over = 0, 0, 0

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        turn = sum(m.get("role") == "assistant" for m in conversations[0]) if conversations else self.turn
        if turn != self.turn:
            self.turn, self.over, self.live = turn, self.bar.total - self.live, 0
            self.bar.set_postfix(
                turn=turn + 1, refresh=True
            )  # a slow model shows life between finished games
        self.live += len(conversations)
        over = self.over if self.chunked else self.bar.total - self.live
        if over > self.bar.n:
            self.bar.update(over - self.bar.n)
        return self.policy(conversations)


def play_row(
    env: Environment,
    name: str,
    policy: Policy,
    specs: Sequence[dict],
    max_batch_size: int | None = None,
    progress: bool = True,
) -> list[Episode]:
    """Every game of the suite for one policy, in one batched rollout."""
    with tqdm(total=len(specs), desc=name, unit="game", disable=not progress, leave=True) as bar:
        progress_policy = _Progress(
            policy, bar, chunked=max_batch_size is not None and max_batch_size < len(specs)
        )
        episodes = env.rollout(progress_policy, specs, max_batch_size=max_batch_size)
        bar.update(bar.total - bar.n)
    return episodes


def exact_row(
    env: Environment, policy: Policy, opponents: Sequence[str]
) -> dict[str, dict[str, float]] | None:
    """A greedy policy's exact expected rates per column group, when the env computes them (no sampling noise)."""
    start = time.perf_counter()
    out = env.exact_suite(policy, opponents)
    if out is not None:
        logger.info("exact results in %.1f s", time.perf_counter() - start)
    return out


def exact_lines(result: MatrixResult) -> list[str]:
    """Markdown: the exact table of every greedy model row (expected rates, both sides pooled)."""
    if not result.exact:
        return []
    md = [
        "## Exact results (greedy model rows, no sampling noise)",
        "",
        result.exact_note,
        "",
        "| policy | opponent | win | draw | loss | games with an invalid move | optimal moves |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, rows in result.exact.items():
        for opponent, r in rows.items():
            md.append(
                f"| {name} | {opponent} | {r['win']:.3f} | {r['draw']:.3f} | {r['loss']:.3f} "
                f"| {r['any_invalid']:.3f} | {r['move_optimality']:.3f} |"
            )
    return md + [""]


def worst_lines(result: MatrixResult) -> list[str]:
    """Markdown: each greedy model row's outcome against an opponent that knows it, with the line."""
    if not result.worst:
        return []
    md = [
        "## Worst case (an opponent that knows the model)",
        "",
        "The best response to each greedy model, computed exactly over its whole strategy: the outcome it is held to"
        " on each side, and the line; then the same against a sound opponent, one that never gives up the game's"
        " value itself (any strong player): a model held to a draw there loses only after its opponent blundered.",
        "",
        "| policy | side | worst outcome | line | sound opponent | line |",
        "|---|---|---|---|---|---|",
    ]
    for name, sides in result.worst.items():
        for side, w in sides.items():
            sound = w.get("sound") or {"outcome": "", "line": []}
            md.append(
                f"| {name} | {side} | {w['outcome']} | {', '.join(w['line'])} | {sound['outcome']} "
                f"| {', '.join(sound['line'])} |"
            )
    return md + [""]


def run_matrix(
    config: EvaluateConfig,
    built: Mapping[str, Policy] | None = None,
    env: Environment | Mapping[str, Any] | None = None,
    play_in: Callable[[Environment, int], Environment] | None = None,
) -> MatrixResult:
    """Play every policy of `config` against the frozen suite; `built` gives ready policy objects by row name.

    `env`: the environment or its `load_environment` kwargs (default: the default env). `play_in(env, live)`: where
    a row's `live` games are played (the pipeline: on an env server); default: here. Exact results are always
    computed here.
    """
    built = dict(built or {})
    local = env if isinstance(env, Environment) else load_environment(**{"name": DEFAULT_ENV, **(env or {})})
    groups = config.opponents or local.suite_groups()
    specs = local.suite_specs(groups, config.games, config.seed)
    play = play_in(local, len(specs)) if play_in else local  # a row's games are all live together
    result = MatrixResult(
        rows=[],
        episodes={},
        policies=config.rows(local.reference_policies),
        opponents=list(groups),
        games=config.games,
        decoding=config.decoding,
        sides=tuple(local.suite_sides),
        suite=local.evaluation_suite,
        headline=local.headline_metric,
        render=local.render_episode,
        exact_note=local.exact_note,
    )
    for name, spec in dict(result.policies).items():
        try:
            _play_policy_row(result, play, local, specs, config, name, built.get(name) or spec)
        except Exception as exc:
            if not result.rows:
                raise  # nothing finished: nothing to keep
            played = {n: s for n, s in result.policies.items() if n in result.episodes}
            result.policies = played
            raise MatrixInterrupted(result, name, exc) from exc
    return result


@contextlib.contextmanager
def _served(
    config: EvaluateConfig, name: str, spec: str | Policy
) -> Iterator[tuple[str | Policy, str | None]]:
    """A row's spec and endpoint model name; a `vllm_rows` row's model is served by vLLM for the block."""
    if isinstance(spec, str) and name in config.vllm_rows:
        with VLLMServer(spec, config.vllm, name=name) as server:
            yield server.base_url, server.name
    else:
        yield spec, config.api_model


def _play_policy_row(
    result: MatrixResult,
    play: Environment,
    local: Environment,
    specs: list[dict],
    config: EvaluateConfig,
    name: str,
    spec: str | Policy,
) -> None:
    """Play one policy row of the matrix in `play` (exact results in `local`) and add its episodes, cells and
    timings to `result`."""
    with _served(config, name, spec) as (spec, model):
        policy = (
            make_policy(
                spec,
                seed=config.seed,
                temperature=config.temperature,
                max_new_tokens=config.max_new_tokens,
                model=model,
                env=local,
            )
            if isinstance(spec, str)
            else spec
        )
        decoding = "scripted" if getattr(policy, "scripted", False) else config.decoding
        start = time.perf_counter()
        episodes = play_row(play, name, policy, specs, config.max_batch_size, config.progress)
        result.seconds[name] = seconds = time.perf_counter() - start
    logger.info(  # one progress line per row: a long matrix shows life without a bar
        "%s: %d games in %.1f s (%.1f games/s)",
        name,
        len(episodes),
        seconds,
        len(episodes) / max(seconds, 1e-9),
    )
    if getattr(policy, "greedy", False) is True:  # a local model decoding greedily: deterministic
        exact = exact_row(local, policy, result.opponents)
        if exact is not None:
            result.exact[name] = exact
        worst = local.worst_case(policy)
        if worst is not None:
            result.worst[name] = worst
    del policy  # a local model's memory goes before the next row loads
    result.episodes[name] = episodes
    metrics = ("reward", *local.rubric.names)
    for i, (group, side) in enumerate((o, s) for o in result.opponents for s in result.sides):
        cell = episodes[i * config.games : (i + 1) * config.games]
        if result.suite == "matrix":
            result.rows.append(cell_row(name, group, side, decoding, cell))
        else:
            result.rows.append(rubric_row(name, group, side, decoding, cell, metrics))
