"""The evaluation matrix: policies (rows) against the env's suite columns (group x side), on a frozen suite.

The env says what its columns and metrics are (`env.evaluation_suite()`, wander/core/evaluation_suite.py): a game's
opponents x who moves first, or difficulty strata x splits; each cell's row is built from the suite
(wander/eval/cells.py). Row fields keep the names `opponent` (the column group) and `side`. Exact results and worst
cases are added for greedy rows when the env has those capabilities (wander/core/capabilities.py).

Every cell is a fixed list of episode specs from the suite seed, the same for every policy, so rows are
comparable and greedy reruns are identical. All games of one policy go through one batched rollout, so a local
model answers every live game of every cell in one `generate` call per turn.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from wander.core.capabilities import ExactEvaluation, WorstCase
from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.core.evaluation_suite import EvaluationSuite
from wander.core.pipeline_hooks import games_per_cell, reply_budget
from wander.core.policy import Conversation, Policy, Reply
from wander.core.registry import DEFAULT_ENV, load_environment
from wander.eval.cells import cell_row
from wander.eval.config import EvaluateConfig
from wander.policies.loading import make_policy
from wander.policies.vllm_server import VLLMServer

logger = logging.getLogger(__name__)


@dataclass
class MatrixResult:
    """Tidy rows (one per policy x opponent x side), the episodes behind them, and timings."""

    rows: list[dict]
    episodes: dict[str, list[Episode]]
    policies: dict[str, str]
    opponents: list[str]
    games: int
    decoding: str
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


def exact_row(env: ExactEvaluation, policy: Policy, opponents: Sequence[str]) -> dict[str, dict[str, float]]:
    """A greedy policy's exact expected metrics per column group (no sampling noise)."""
    start = time.perf_counter()
    out = env.exact_suite(policy, opponents)
    logger.info("exact results in %.1f s", time.perf_counter() - start)
    return out


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
    # A null reply budget or games per cell is the env's: what `wander eval` and the stages play with unless told.
    config = config.model_copy(
        update={
            "max_new_tokens": reply_budget(local, config.max_new_tokens),
            "games": games_per_cell(local, config.games),
        }
    )
    suite = local.evaluation_suite()
    groups = config.opponents or list(suite.groups)
    specs = local.suite_specs(groups, config.games, config.seed)
    play = play_in(local, len(specs)) if play_in else local  # a row's games are all live together
    result = MatrixResult(
        rows=[],
        episodes={},
        policies=config.rows(local.reference_policies),
        opponents=list(groups),
        games=config.games,
        decoding=config.decoding,
        suite=suite,
        render=local.render_episode,
    )
    if isinstance(local, ExactEvaluation):
        result.exact_note, result.exact_columns = local.exact_note, tuple(local.exact_columns)
    if isinstance(local, WorstCase):
        result.worst_lines = local.worst_case_lines
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
        if isinstance(local, ExactEvaluation):
            result.exact[name] = exact_row(local, policy, result.opponents)
        if isinstance(local, WorstCase):
            result.worst[name] = local.worst_case(policy)
    del policy  # a local model's memory goes before the next row loads
    result.episodes[name] = episodes
    for i, (group, side) in enumerate((o, s) for o in result.opponents for s in result.sides):
        cell = episodes[i * config.games : (i + 1) * config.games]
        result.rows.append(cell_row(result.suite, name, group, side, decoding, cell))
