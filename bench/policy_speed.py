"""Scratch-model evaluation speed: 64 games batched per turn vs one game at a time, same model."""

from __future__ import annotations

import tempfile
import time

from envs import load_environment
from envs.policies.scratch_model import build_scratch_model
from envs.policies.transformers_policy import TransformersPolicy

GAMES = 64
SEQUENTIAL_GAMES = 16  # one game at a time is slow: time the first 16 of the same 64 games
MAX_NEW_TOKENS = 24  # an untrained model rambles; cap it so both modes do the same bounded work


def _play(env, policy, specs, one_at_a_time: bool) -> tuple[float, int]:
    start = time.perf_counter()
    episodes = env.rollout(policy, specs, max_batch_size=1 if one_at_a_time else None)
    elapsed = time.perf_counter() - start
    tokens = sum(len(r.completion_ids or []) for ep in episodes for r in ep.replies)
    return elapsed, tokens


def run() -> dict:
    """Episodes and generated tokens per second, batched and sequential, plus the speed-up."""
    env = load_environment("tictactoe", num_eval=GAMES, max_turns=4)
    with tempfile.TemporaryDirectory() as tmp:
        path = build_scratch_model(env.corpus(), f"{tmp}/model")
        specs = env.get_dataset("eval").to_list()
        out = {}
        for mode, games in (("batched", GAMES), ("sequential", SEQUENTIAL_GAMES)):
            policy = TransformersPolicy.from_pretrained(path, greedy=True, max_new_tokens=MAX_NEW_TOKENS)
            elapsed, tokens = _play(env, policy, specs[:games], one_at_a_time=games == SEQUENTIAL_GAMES)
            out[f"{mode}_episodes_per_s"] = games / elapsed
            out[f"{mode}_tokens_per_s"] = tokens / elapsed
            out[f"{mode}_wall_s"] = elapsed
    out["batched_speedup"] = out["batched_episodes_per_s"] / out["sequential_episodes_per_s"]
    out["target_batched_speedup"] = 10.0
    out["games"] = {"batched": GAMES, "sequential": SEQUENTIAL_GAMES, "max_new_tokens": MAX_NEW_TOKENS}
    return out
