"""Resumable evaluation: every finished unit of the matrix journaled as it finishes, keyed by all that decides it.

A unit is one policy row's one sample: every item of the frozen suite in one batched rollout, as the matrix plays it
(`wander.eval.matrix`). Not a smaller piece: a sampled model's replies depend on the batch they were asked in (its
seed advances per call), so episodes replayed apart from their batch would differ from an uninterrupted run's; a
whole unit replays exactly, and the normal path keeps its one rollout per row and sample. A kill loses the unit in
progress, never one that finished.

A unit's key is a digest of its inputs: the env's settings, the suite's specs, the row's policy (a scripted
player's name, a model folder's content, a hub id, an endpoint's URL and model name, vLLM's settings), the decoding
(temperature, reply budget, batch size, bf16), the sample's index and seed. A changed input is another key, so
nothing is reused across inputs. A row given as a ready policy object has no such identity and is not journaled.

The journal is `<out_dir>/.journal.jsonl` (`wander.core.journal.Journal`: whole fsync'd lines, a torn last line
cut). It is no DVC output (dvc.yaml names the report's files) and is removed once the report is written; a row
that fails keeps it, so the rerun resumes the rows and samples that finished.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wander.core.digest import content_digest, digest
from wander.core.episode import Episode
from wander.core.journal import Journal
from wander.core.policy import Policy
from wander.eval.config import EvaluateConfig
from wander.policies.loading import is_scripted_name, policy_kind
from wander.policies.vllm_server_config import VLLMServerConfig

logger = logging.getLogger(__name__)

JOURNAL = ".journal.jsonl"  # under the output folder, beside the report it is removed after
TUPLE = "__tuple__"  # how a tuple in an episode's state is tagged, so it comes back a tuple
ATOMS = frozenset({str, int, float, bool, type(None)})  # what JSON carries back as it was


class Unjournalable(TypeError):
    """An episode holds a value JSON cannot carry back exactly: its unit is played again, never restored approximately."""


@dataclass
class Unit:
    """A restored unit: its episodes, how long they took to play, how the row decoded, and its exact results."""

    episodes: list[Episode]
    seconds: float
    decoding: str
    extras: dict


def run_inputs(
    config: EvaluateConfig, env_config: Mapping[str, Any], specs: Sequence[dict], max_new_tokens: int
) -> dict:
    """What every unit of one evaluation shares that decides its episodes (the seed is each sample's own)."""
    return {
        "env": dict(env_config),
        "specs": digest(list(specs)),
        "temperature": config.temperature,
        "max_new_tokens": max_new_tokens,
        "max_batch_size": config.max_batch_size,  # a sampled model's replies depend on the batch
        "bf16": config.bf16,
        "api_model": config.api_model,
    }


def row_identity(spec: str | Policy, vllm: VLLMServerConfig | None) -> dict | None:
    """What a row's policy is, by content where it has a file; None for a ready policy object (not journaled)."""
    if not isinstance(spec, str):
        return None
    if policy_kind(spec) is not None:
        who: dict = {"url": spec}  # an endpoint is known by its URL and the model name the inputs hold
    elif is_scripted_name(spec):
        who = {"scripted": spec}
    elif Path(spec).exists():
        who = {"model": content_digest(spec)}  # a retrained model in the same folder is another policy
    else:
        who = {"hub": spec}
    if vllm is not None:  # vLLM computes otherwise than transformers; where it listens does not matter
        settings = dataclasses.asdict(vllm)
        who["vllm"] = {k: v for k, v in settings.items() if k not in ("host", "port", "python")}
    return who


def unit_key(inputs: dict, row: dict, sample: int, seed: int) -> str:
    """The journal key of one row's one sample."""
    return digest({"inputs": inputs, "row": row, "sample": sample, "seed": seed})


class EvalJournal:
    """The units of an evaluation already played, under its output folder, and the ones it plays next."""

    def __init__(self, out_dir: str | os.PathLike) -> None:
        self.journal = Journal(Path(out_dir) / JOURNAL, key="key")
        self.done = self.journal.load()
        self.resumed = 0  # episodes restored by this run
        self.warned = False

    @property
    def path(self) -> Path:
        """Where the journal lives."""
        return self.journal.path

    def restore(self, key: str) -> Unit | None:
        """The unit journaled under `key`, or None to play it."""
        record = self.done.get(key)
        if record is None:
            return None
        episodes = [Episode(**decode(e)) for e in record["episodes"]]
        self.resumed += len(episodes)
        return Unit(episodes, record["seconds"], record["decoding"], decode(record["extras"]))

    def save(self, key: str, where: dict, unit: Unit) -> None:
        """Journal a finished unit (fsync'd before returning); one whose values JSON cannot carry is skipped."""
        try:
            episodes = [encode(_fields(ep)) for ep in unit.episodes]
            record = {"key": key, **where, "seconds": unit.seconds, "decoding": unit.decoding}
            record.update(extras=encode(unit.extras), episodes=episodes)
        except Unjournalable as exc:
            if not self.warned:
                logger.warning("not journaled (a rerun plays it again): %s", exc)
                self.warned = True
            return
        self.journal.append([record])
        self.done[key] = record

    def remove(self) -> None:
        """Delete the journal: its units are in the written report."""
        self.journal.remove()


def _fields(episode: Episode) -> dict:
    # The replies (token ids, logprobs) are what training reads; no report does, and they stay out of the journal.
    return {
        "spec": episode.spec,
        "messages": episode.messages,
        "state": episode.state,
        "prompt_len": episode.prompt_len,
        "done": episode.done,
        "reward": episode.reward,
        "values": episode.values,
        "error": episode.error,
    }


def encode(value: Any) -> Any:
    """`value` as JSON that `decode` turns back into an equal value of the same types (tuples tagged)."""
    # Exact types, not isinstance: a str or int subclass (an enum) would come back as its base type.
    kind = type(value)
    if kind in ATOMS:
        return value
    if kind is list:
        return [encode(v) for v in value]
    if kind is dict:
        if all(type(k) is str for k in value) and TUPLE not in value:
            if all(type(v) is str for v in value.values()):  # a message: kept as it is, the usual case
                return value
            return {k: encode(v) for k, v in value.items()}
    elif kind is tuple:
        return {TUPLE: [encode(v) for v in value]}
    raise Unjournalable(f"a value of type {kind.__name__} ({str(value)[:60]!r})")


def decode(value: Any) -> Any:
    """The value `encode` wrote."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {TUPLE}:
            return tuple(decode(v) for v in value[TUPLE])
        return {k: decode(v) for k, v in value.items()}
    return value
