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
import functools
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from tqdm.auto import tqdm

from wander.core.capabilities import ExactEvaluation, WorstCase
from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.core.pipeline_hooks import games_per_cell, reply_budget
from wander.core.policy import Conversation, Policy, Reply
from wander.core.registry import DEFAULT_ENV, load_environment
from wander.eval.cells import cell_row
from wander.eval.config import EvaluateConfig
from wander.eval.matrix_result import MatrixResult
from wander.policies.loading import make_policy
from wander.policies.vllm_server import VLLMServer
from wander.policies.vllm_server_config import VLLMServerConfig

logger = logging.getLogger(__name__)


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
    local = env if isinstance(env, Environment) else load_environment(**{"name": DEFAULT_ENV, **(env or {})})
    # A null reply budget or games per cell is the env's: what `wander eval` and the stages play with unless told.
    max_new_tokens = reply_budget(local, config.max_new_tokens)
    games = games_per_cell(local, config.games)
    suite = local.evaluation_suite()
    groups = config.opponents or list(suite.groups)
    specs = local.suite_specs(groups, games, config.seed)
    where = play_in(local, len(specs)) if play_in else local  # a row's games are all live together
    policies = config.rows(local.reference_policies)
    result = MatrixResult(
        rows=[],
        episodes={},
        policies=policies,
        opponents=list(groups),
        games=games,
        decoding=config.decoding,
        seed=config.seed,
        baseline=config.baseline or next(iter(policies)),  # null: the first row
        suite=suite,
        render=local.render_episode,
    )
    if isinstance(local, ExactEvaluation):
        result.exact_note, result.exact_columns = local.exact_note, tuple(local.exact_columns)
    if isinstance(local, WorstCase):
        result.worst_lines = local.worst_case_lines
    # Every row's policy is built alike and its games played alike: bound once here, so a row reads no config.
    make = functools.partial(
        make_policy,
        seed=config.seed,
        temperature=config.temperature,
        max_new_tokens=max_new_tokens,
        model=config.api_model,
        env=local,
        bf16=config.bf16,
    )
    play = functools.partial(
        play_row, where, specs=specs, max_batch_size=config.max_batch_size, progress=config.progress
    )
    built = dict(built or {})
    for name, spec in policies.items():
        vllm = config.vllm if name in config.vllm_rows else None
        try:
            _play_policy_row(result, local, name, built.get(name) or spec, make, play, vllm)
        except Exception as exc:
            if not result.rows:
                raise  # nothing finished: nothing to keep
            result.policies = {n: s for n, s in policies.items() if n in result.episodes}
            if result.baseline not in result.policies:  # the report compares with a row it has
                result.baseline = next(iter(result.policies))
            raise MatrixInterrupted(result, name, exc) from exc
    return result


@contextlib.contextmanager
def _row_policy(
    name: str, spec: str | Policy, make: Callable[..., Policy], vllm: VLLMServerConfig | None
) -> Iterator[Policy]:
    """A row's policy: a ready one as it is, else `make(spec)`; with `vllm`, its model is served by vLLM for the
    block."""
    if not isinstance(spec, str):
        yield spec
    elif vllm is None:
        yield make(spec)
    else:
        with VLLMServer(spec, vllm, name=name) as server:
            yield make(server.base_url, model=server.name)


def _play_policy_row(
    result: MatrixResult,
    local: Environment,
    name: str,
    spec: str | Policy,
    make: Callable[..., Policy],
    play: Callable[[str, Policy], list[Episode]],
    vllm: VLLMServerConfig | None,
) -> None:
    """Play one policy row of the matrix with `play` (its policy built by `make`, exact results in `local`) and
    add its episodes, cells and timings to `result`."""
    with _row_policy(name, spec, make, vllm) as policy:
        decoding = "scripted" if getattr(policy, "scripted", False) else result.decoding
        start = time.perf_counter()
        episodes = play(name, policy)
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
        cell = episodes[i * result.games : (i + 1) * result.games]
        result.rows.append(cell_row(result.suite, name, group, side, decoding, cell))
