"""The evaluation matrix: policies (rows) against the env's suite columns (group x side), on a frozen suite.

The env says what its columns and metrics are (`env.evaluation_suite()`, wander/core/evaluation_suite.py): a game's
opponents x who moves first, or difficulty strata x splits; each cell's row is built from the suite
(wander/eval/cells.py). Row fields keep the names `opponent` (the column group) and `side`. Exact results and worst
cases are added for greedy rows when the env has those capabilities (wander/core/capabilities.py).

Every cell is a fixed list of episode specs from the suite seed, the same for every policy, so rows are
comparable and greedy reruns are identical. All games of one policy go through one batched rollout, so a local
model answers every live game of every cell in one `generate` call per turn. With `samples` k, a row plays that
rollout k times, sample j with its own policy seed (`pass_at_k.sample_seed`), and its cells gain pass@k and avg@k
(wander/eval/pass_at_k.py). Given a journal (wander/eval/journal.py), each finished row sample is journaled and a
rerun restores the ones it holds instead of playing them.
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
from wander.eval.journal import EvalJournal, Unit, row_identity, run_inputs, unit_key
from wander.eval.matrix_result import MatrixResult
from wander.eval.pass_at_k import pass_rule, sample_columns, sample_seed
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
    journal: EvalJournal | None = None,
    env_config: Mapping[str, Any] | None = None,
) -> MatrixResult:
    """Play every policy of `config` against the frozen suite; `built` gives ready policy objects by row name.

    `env`: the environment or its `load_environment` kwargs (default: the default env). `play_in(env, live)`: where
    a row's `live` games are played (the pipeline: on an env server); default: here. Exact results are always
    computed here. `journal`: where finished row samples are kept and restored from, keyed with `env_config` (the
    env's `load_environment` kwargs; needed with a journal when `env` is an environment object).
    """
    local = env if isinstance(env, Environment) else load_environment(**{"name": DEFAULT_ENV, **(env or {})})
    # A null reply budget or games per cell is the env's: what `wander eval` and the stages play with unless told.
    max_new_tokens = reply_budget(local, config.max_new_tokens)
    games = games_per_cell(local, config.games)
    suite = local.evaluation_suite()
    rule = pass_rule(suite, config.pass_threshold) if config.samples > 1 else None  # refused before any game
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
        samples=config.samples,
        pass_threshold=config.pass_threshold,
    )
    report_env_parts(result, local)
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
    if journal is not None:
        if env_config is None and isinstance(env, Environment):
            raise ValueError(
                "a journaled matrix on an environment object needs its env_config to key the units"
            )
        inputs = run_inputs(config, env_config or {"name": DEFAULT_ENV, **(env or {})}, specs, max_new_tokens)
    row_keys = {}
    for name, spec in policies.items():  # model folders are hashed here, before any game
        vllm = config.vllm if name in config.vllm_rows else None
        who = row_identity(built.get(name) or spec, vllm) if journal is not None else None
        seeds = [sample_seed(config.seed, j) for j in range(config.samples)]
        row_keys[name] = [unit_key(inputs, who, j, seed) if who else None for j, seed in enumerate(seeds)]
    for name, spec in policies.items():
        vllm = config.vllm if name in config.vllm_rows else None
        try:
            _play_policy_row(
                result, local, name, built.get(name) or spec, make, play, vllm, row_keys[name], journal, rule
            )
        except Exception as exc:
            if not result.rows:
                raise  # nothing finished: nothing to keep
            result.policies = {n: s for n, s in policies.items() if n in result.episodes}
            if result.baseline not in result.policies:  # the report compares with a row it has
                result.baseline = next(iter(result.policies))
            raise MatrixInterrupted(result, name, exc) from exc
    return result


def report_env_parts(result: MatrixResult, env: Environment) -> None:
    """What the report takes from the env itself: its exact results' note and columns, its worst-case section."""
    if isinstance(env, ExactEvaluation):
        result.exact_note, result.exact_columns = env.exact_note, tuple(env.exact_columns)
    if isinstance(env, WorstCase):
        result.worst_lines = env.worst_case_lines


def matrix_row(
    result: MatrixResult, name: str, group: str, side: str, decoding: str, cell: list, rule: tuple | None
) -> dict:
    """One cell's row, with its pass@k columns when `rule` (the pass rule) is given."""
    row = cell_row(result.suite, name, group, side, decoding, cell)
    if rule is not None:
        row.update(sample_columns(result.suite, cell, result.games, result.samples, rule))
    return row


@contextlib.contextmanager
def _row_policies(
    name: str, spec: str | Policy, make: Callable[..., Policy], vllm: VLLMServerConfig | None
) -> Iterator[Callable[[int], Policy]]:
    """A row's policy for a sample's seed: a ready one as it is (its own randomness plays every sample), else
    `make(spec, seed=...)`; with `vllm`, its model is served by vLLM for the block, once for every sample."""
    if not isinstance(spec, str):
        yield lambda seed: spec
    elif vllm is None:
        yield lambda seed: make(spec, seed=seed)
    else:
        with VLLMServer(spec, vllm, name=name) as server:
            yield lambda seed: make(server.base_url, model=server.name, seed=seed)


def _play_policy_row(
    result: MatrixResult,
    local: Environment,
    name: str,
    spec: str | Policy,
    make: Callable[..., Policy],
    play: Callable[[str, Policy], list[Episode]],
    vllm: VLLMServerConfig | None,
    keys: Sequence[str | None],
    journal: EvalJournal | None,
    rule: tuple | None,
) -> None:
    """Play one policy row of the matrix with `play`, each sample with its policy built by `make` (exact results in
    `local`), restoring the samples `journal` holds under `keys` and journaling those played; add its episodes,
    cells and timings to `result`."""
    units = {j: unit for j, key in enumerate(keys) if journal and key and (unit := journal.restore(key))}
    restored = sum(len(unit.episodes) for unit in units.values())
    todo = [j for j in range(result.samples) if j not in units]
    if todo:
        with _row_policies(name, spec, make, vllm) as seeded:
            for j in todo:
                units[j] = unit = _play_sample(
                    result, local, name, seeded(sample_seed(result.seed, j)), j, play
                )
                if journal is not None and keys[j]:
                    journal.save(keys[j], {"policy": name, "sample": j}, unit)
    units = dict(sorted(units.items()))
    result.seconds[name] = sum(unit.seconds for unit in units.values())  # a restored unit's own time
    played, seconds = (
        sum(f(units[j]) for j in todo) for f in (lambda u: len(u.episodes), lambda u: u.seconds)
    )
    logger.info(  # one progress line per row: a long matrix shows life without a bar
        "%s: %d games in %.1f s (%.1f games/s)%s",
        name,
        played,
        seconds,
        played / max(seconds, 1e-9),
        f"; {restored} restored from the journal" if restored else "",
    )
    first = units[0]
    for (
        kind,
        found,
    ) in first.extras.items():  # a greedy row's exact results and worst case, played or restored
        getattr(result, kind)[name] = found
    episodes, games = [], result.games
    for i, (group, side) in enumerate((o, s) for o in result.opponents for s in result.sides):
        cell = [ep for unit in units.values() for ep in unit.episodes[i * games : (i + 1) * games]]
        result.rows.append(matrix_row(result, name, group, side, first.decoding, cell, rule))
        episodes += cell
    result.episodes[name] = episodes


def _play_sample(
    result: MatrixResult,
    local: Environment,
    name: str,
    policy: Policy,
    sample: int,
    play: Callable[[str, Policy], list[Episode]],
) -> Unit:
    """One sample of a row: every item played by `policy`, with a greedy model's exact results and worst case."""
    decoding = "scripted" if getattr(policy, "scripted", False) else result.decoding
    start = time.perf_counter()
    episodes = play(name if result.samples == 1 else f"{name} #{sample}", policy)
    seconds = time.perf_counter() - start
    extras: dict = {}
    if getattr(policy, "greedy", False) is True:  # a local model decoding greedily: deterministic
        if isinstance(local, ExactEvaluation):
            extras["exact"] = exact_row(local, policy, result.opponents)
        if isinstance(local, WorstCase):
            extras["worst"] = local.worst_case(policy)
    del policy  # a local model's memory goes before the next sample or row loads
    return Unit(episodes, seconds, decoding, extras)
