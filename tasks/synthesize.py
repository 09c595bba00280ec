"""The synthesize stage: the teacher plays episodes through the OpenAI Chat Completions protocol, resumably.

python -m tasks.synthesize [--params params.yaml] [--profile smoke]

The default teacher is the embedded one (an OpenAI-compatible server started on a free loopback port and stopped
with the stage); `teacher_url` points at any real endpoint instead. Every finished batch of episodes is appended
to a journal (`<work_dir>/synthesize/<fingerprint>.jsonl`, fsync'd) that is not a DVC output, so a killed run
restarts where it stopped: journaled seeds are skipped, none is played twice, none is lost. The final
`episodes.jsonl` is written atomically once every episode is in, then the journal is removed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path

import pandas as pd

from tasks.params.data_sections import Synthesize
from tasks.params.sections import Params
from tasks.runtime.episode_specs import validate_specs
from tasks.runtime.episodes import episode_env
from tasks.runtime.fingerprint import content_digest, digest
from tasks.runtime.tracking import log_artifact, log_dict, log_metrics, write_stage_metrics
from tasks.runtime.validation import gxe, validate
from wander import Environment, Policy, load_environment
from wander.core.atomic_io import atomic_dir, read_jsonl, write_json, write_jsonl
from wander.core.capabilities import DecisionTree, require
from wander.core.journal import Journal
from wander.core.policy import Conversation, Reply
from wander.policies.openai_policy import OpenAIPolicy, PolicyStats
from wander.policies.openai_server import serve_in_process, teacher_app
from wander.policies.vllm_server import VLLMServer

logger = logging.getLogger(__name__)


class RateLimited:
    """A policy wrapper keeping the average request rate under `rate` per second, `burst` requests at a time.

    `policy` may be swapped between calls (synthesis uses one teacher client per batch) and the pace carries on.
    """

    def __init__(
        self,
        policy: Policy | None,
        rate: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.policy = policy
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self.sleep = sleep
        self.next_start = 0.0

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        """Answer in slices of `burst`, each starting no sooner than its share of the rate allows."""
        replies: list[Reply] = []
        for i in range(0, len(conversations), self.burst):
            part = conversations[i : i + self.burst]
            now = self.clock()
            if self.next_start > now:
                self.sleep(self.next_start - now)
                now = self.next_start
            self.next_start = now + len(part) / self.rate
            replies.extend(self.policy(part))
        return replies


@contextlib.contextmanager
def teacher_endpoint(config: Synthesize, env: Environment) -> Iterator[str]:
    """The teacher's base URL: the configured endpoint, a checkpoint served by vLLM for the duration, or the env's
    embedded teacher served for the duration."""
    if config.teacher_url:
        yield config.teacher_url
        return
    if config.teacher_model:
        with VLLMServer(config.teacher_model, config.vllm, name=teacher_model(config, env)) as server:
            yield server.base_url
        return
    skill = teacher_skill(config, env)
    with serve_in_process(teacher_app(env, skill, teacher_model(config, env))) as url:
        logger.info("embedded %s teacher (skill %.2f) serving at %s", env.name, skill, url)
        yield url


def teacher_skill(config: Synthesize, env: Environment) -> float:
    """The embedded teacher's slip rate: the section's, or the env's default."""
    return env.teacher_skill if config.teacher_skill is None else config.teacher_skill


def teacher_model(config: Synthesize, env: Environment) -> str | None:
    """The model name requests carry: the section's, the embedded teacher's, or None (the endpoint's only one; a
    vLLM teacher serves under its folder's name)."""
    return config.teacher.model or (None if config.teacher_url or config.teacher_model else env.teacher_model)


def teacher_policy(config: Synthesize, base_url: str, seed: int, model: str | None = None) -> OpenAIPolicy:
    """The OpenAI-protocol client of the teacher (`synthesize.teacher`) at `base_url`, with a batch's seed."""
    return OpenAIPolicy(
        dataclasses.replace(config.teacher, base_url=base_url, seed=seed, model=model or config.teacher.model)
    )


def fingerprint(params: Params) -> str:
    """Hash of everything that decides how an episode plays out; a journal is only resumed under the same one."""
    config, teacher = params.synthesize, params.synthesize.teacher
    env = load_environment(**params.env.kwargs())
    who = {"url": config.teacher_url or "embedded", "model": teacher_model(config, env)}
    if config.teacher_model:  # what the checkpoint is, not where: a retrained one plays other games
        model = config.teacher_model
        weights = content_digest(model) if Path(model).exists() else model  # a hub id names its weights
        who.update(url="vllm", weights=weights, dtype=config.vllm.dtype)
    elif not config.teacher_url:
        who["skill"] = teacher_skill(config, env)
    decisive = {
        "env": params.env.kwargs(),
        "teacher": who,
        "temperature": teacher.temperature,
        "top_p": teacher.top_p,
        "max_tokens": teacher.max_tokens,
        "seed": teacher.seed,
    }
    return digest(decisive)


def journal_path(params: Params) -> Path:
    """Where this run's journal lives."""
    return Path(params.layout.work) / "synthesize" / f"{fingerprint(params)}.jsonl"


def load_specs(params: Params, env: Environment) -> list[dict]:
    """The specs to play, after the split passed the generate stage's validation (bad input stops here)."""
    config = params.synthesize
    path = Path(params.layout.datasets) / f"{config.split}.jsonl"
    if not path.exists():
        raise FileNotFoundError(
            f"no episode specs at {path}; run the generate stage first (dvc repro generate)"
        )
    specs = read_jsonl(path)
    validate_specs({config.split: pd.DataFrame(specs)}, env.spec_checks())
    return specs[: config.num_episodes]


def batches(specs: list[dict], size: int, skip: dict) -> Iterator[tuple[int, list[dict]]]:
    """Numbered fixed slices of the spec list, minus journaled seeds; empty slices are skipped.

    Slicing the full list, not what is left to do, gives a resumed run the same batches as an uninterrupted one,
    and a teacher's reply depends on its batch: on the batch's seed, and identical conversations within one batch
    get distinct request seeds.
    """
    for index, start in enumerate(range(0, len(specs), size)):
        batch = [spec for spec in specs[start : start + size] if spec["seed"] not in skip]
        if batch:
            yield index, batch


def batch_seed(seed: int, index: int) -> int:
    """The teacher's base seed for batch `index`: without it, every identical position gets the identical reply,
    and a strong opponent's games repeat (a third fewer distinct games in a 1,600-game sample)."""
    return random.Random(f"{seed}:{index}").getrandbits(31)


def run(params: Params) -> dict:
    """Play every spec not yet journaled (or, with `mode: tree`, the teacher's whole tree), then write all episodes
    atomically; return and write the metrics (headline: games, the teacher's outcome and invalid-game rates,
    retries, seconds; the rest in the details)."""
    config = params.synthesize
    start = time.monotonic()
    # Its splits are the generate stage's specs (as GRPO's are): an embedded teacher that looks a spec up by its
    # prompt (reasoning_gym's reads the reference answer from it) finds the ones this stage plays.
    local = load_environment(**params.env.kwargs(), specs_dir=params.layout.datasets)
    if config.mode == "tree":  # before the teacher starts: an env without the tree is refused in one line
        require(
            local, DecisionTree, "synthesize.mode: tree", "set synthesize.mode: split (its split's games)"
        )
    stats = PolicyStats()
    rate = config.requests_per_second
    limiter = (
        RateLimited(None, rate, config.teacher.max_concurrency) if rate else None
    )  # one pace across batches
    play_start = time.monotonic()
    if config.mode == "tree":
        records, resumed = play_tree(config, local, limiter, stats), {}
    else:
        specs = load_specs(params, local)
        resumed, played = play_split(params, local, specs, limiter, stats)
        records = [resumed.get(spec["seed"]) or played[spec["seed"]] for spec in specs]
    play_seconds = time.monotonic() - play_start
    report = validate(
        episode_frame(records), episode_expectations(len(records), local.outcomes), "teacher episodes"
    )
    with atomic_dir(params.layout.episodes) as tmp:
        write_jsonl(tmp / "episodes.jsonl", records)
        write_json(tmp / "validation.json", report)
    if config.mode == "split":
        Journal(journal_path(params)).remove()  # everything is in the output now
    metrics = {
        "episodes": len(records),
        "played": len(records) - len(resumed),
        "resumed": len(resumed),
        "seconds": round(time.monotonic() - start, 2),
        "episodes_per_second": round((len(records) - len(resumed)) / play_seconds, 2)
        if play_seconds
        else 0.0,
        "requests": stats.requests,
        "retries": stats.retries,
        "cache_hits": stats.cache_hits,
        "teacher": outcome_rates(records, local.outcomes),
        "per_stratum": {
            str(s): outcome_rates([r for r in records if r["spec"].get("stratum") == s], local.outcomes)
            for s in sorted({r["spec"].get("stratum") for r in records}, key=str)
        },
    }
    teacher = metrics["teacher"]
    headline = {
        "episodes": len(records),
        **{f"teacher_{o}": teacher[o] for o in (*local.outcomes, "reward") if o in teacher},
        "teacher_invalid": teacher["invalid_games"],
        "retries": stats.retries,
        "seconds": metrics["seconds"],
    }
    write_stage_metrics(params.layout, "synthesize", headline, metrics)
    log_artifact(Path(params.layout.episodes) / "validation.json", "validation")
    log_dict(records[:3], "samples/teacher_games.json")
    return metrics


def play_split(
    params: Params, local: Environment, specs: list[dict], limiter: RateLimited | None, stats: PolicyStats
) -> tuple[dict, dict]:
    """The split's episodes, seed -> record: those a journal of this run already holds, and those played now (each
    finished batch journaled)."""
    config = params.synthesize
    env = episode_env(params.env, local, live=config.batch_size)
    model = teacher_model(config, local)
    journal = Journal(journal_path(params))
    wanted = {spec["seed"]: spec for spec in specs}
    # A journaled episode counts only if it was played from the very same spec.
    resumed = {seed: r for seed, r in journal.load().items() if wanted.get(seed) == r["spec"]}
    todo = [spec for spec in specs if spec["seed"] not in resumed]
    logger.info(
        "%d episodes of %s: %d already journaled in %s, %d to play",
        len(specs),
        config.split,
        len(resumed),
        journal.path,
        len(todo),
    )
    played: dict = {}
    play_start = time.monotonic()
    if not todo:
        return resumed, played
    with teacher_endpoint(config, local) as base_url:
        try:
            for index, batch in batches(specs, config.batch_size, skip=resumed):
                policy = teacher_policy(config, base_url, batch_seed(config.teacher.seed, index), model)
                if limiter:
                    limiter.policy = policy
                try:
                    episodes = env.rollout(limiter or policy, batch)
                finally:
                    _add_stats(stats, policy.stats)
                records = [ep.to_dict() for ep in episodes]
                journal.append(records)
                before = len(resumed) + len(played)
                played.update((r["seed"], r) for r in records)
                done = len(resumed) + len(played)
                seconds = time.monotonic() - play_start
                _progress(before, done, len(specs), len(played), seconds, stats)
        except BaseException:  # an error or a stop signal: either way, say what is kept
            logger.error(
                "stopped: %d of %d episodes are journaled in %s; a rerun resumes from there",
                len(resumed) + len(played),
                len(specs),
                journal.path,
            )
            raise
    return resumed, played


def play_tree(
    config: Synthesize, local: Environment, limiter: RateLimited | None, stats: PolicyStats
) -> list[dict]:
    """The teacher's games against every reply of the opponent (`DecisionTree`), each position asked `votes`
    times. Not journaled: the tree takes seconds with the embedded teacher; for a paid API, `teacher.cache_dir`
    keeps every reply, so a rerun asks nothing twice."""
    with teacher_endpoint(config, local) as base_url:
        policy = teacher_policy(config, base_url, config.teacher.seed, teacher_model(config, local))
        if limiter:
            limiter.policy = policy
        try:
            games = local.decision_tree(limiter or policy, config.votes)
        finally:
            _add_stats(stats, policy.stats)
    logger.info(
        "the teacher's tree: %d games, %d requests (%d votes a position), %d retries",
        len(games),
        stats.requests,
        config.votes,
        stats.retries,
    )
    return [game.to_dict() for game in games]


def _add_stats(total: PolicyStats, part: PolicyStats) -> None:
    for f in fields(PolicyStats):
        setattr(total, f.name, getattr(total, f.name) + getattr(part, f.name))


def _progress(before: int, done: int, total: int, played: int, seconds: float, stats: PolicyStats) -> None:
    # A log line per tenth of the run (a screen for thousands of episodes); MLflow gets every batch.
    rate = played / seconds if seconds > 0 else 0.0
    if 10 * before // total != 10 * done // total or done == total:
        logger.info(
            "%d/%d episodes (%.0f%%), %.1f episodes/s, %d requests, %d retries",
            done,
            total,
            100 * done / total,
            rate,
            stats.requests,
            stats.retries,
        )
    log_metrics({"episodes_done": done, "episodes_per_second": rate}, step=done)


def outcome_rates(records: list[dict], outcomes: tuple[str, ...]) -> dict:
    """Share of each of the env's outcomes (mean reward for an env without), of games with an invalid move, mean
    format, errored share."""
    n = len(records) or 1
    counted = Counter(r["state"].get("outcome") for r in records)
    shares = {o: round(counted[o] / n, 4) for o in outcomes}
    if not outcomes:  # the reward is then the only measure of the teacher's quality
        shares["reward"] = round(sum(r["reward"] for r in records) / n, 4)
    return {
        "episodes": len(records),
        **shares,
        "invalid_games": round(sum(r["state"].get("invalid", 0) > 0 for r in records) / n, 4),
        "format": round(sum(r["values"].get("format", 0.0) for r in records) / n, 4),
        "errored": round(sum(r["error"] is not None for r in records) / n, 4),
    }


def episode_frame(records: list[dict]) -> pd.DataFrame:
    """One row per episode with the columns the episode checks read."""
    return pd.DataFrame(
        {
            "seed": [r["seed"] for r in records],
            "stratum": [r["spec"].get("stratum") for r in records],
            "outcome": [r["state"].get("outcome") for r in records],
            "messages": [len(r["messages"]) for r in records],
        }
    )


def episode_expectations(expected_rows: int, outcomes: tuple[str, ...] = ()) -> list:
    """Every spec played exactly once, outcomes (when the env has them) known, conversations non-empty."""
    g = gxe()
    expectations = [
        g.ExpectTableRowCountToEqual(value=expected_rows),
        g.ExpectColumnValuesToBeUnique(column="seed", description="no episode played twice"),
        g.ExpectColumnValuesToNotBeNull(column="seed"),
        # A user turn and the reply, at least: a mid-game start (env midgame_starts) can end on its first move.
        g.ExpectColumnValuesToBeBetween(column="messages", min_value=2),
    ]
    if outcomes:
        expectations.insert(3, g.ExpectColumnValuesToBeInSet(column="outcome", value_set=list(outcomes)))
    return expectations


if __name__ == "__main__":
    from tasks.runtime.stage import stage_main

    sys.exit(stage_main("synthesize", run))
