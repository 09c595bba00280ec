"""Scratch-model evaluation speed: 64 games batched per turn vs one game at a time, same model, rounds and medians.

Each round plays the same games four ways, interleaved so a busy neighbour slows them alike: batched and one at a
time, each through the policy's fast greedy decoder and through transformers' `generate` (`fast_greedy=False`, the
path before it). Threads are pinned (`WANDER_BENCH_THREADS`, default 1: on 2 shared cores two threads collapse);
tokens/s are reported per wall second (the target) and per CPU second of this process (what a busy machine does not
distort), each as the median over rounds with every round kept. `batched_cpu_share` (CPU seconds per wall second)
says whether a round had its core: well below 1, its wall numbers measure the neighbour, not the decoder.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

import torch

from wander import load_environment
from wander.policies.scratch_model import build_scratch_model
from wander.policies.transformers_policy import TransformersPolicy

GAMES = 64
SEQUENTIAL_GAMES = 16  # one game at a time is slow: time the first 16 of the same 64 games
MAX_NEW_TOKENS = 24  # an untrained model rambles; cap it so both modes do the same bounded work
ROUNDS = 3
DECODERS = {"fast": True, "generate": False}  # TransformersPolicy(fast_greedy=...)


def _play(env, policy, specs, one_at_a_time: bool) -> dict:
    """Play `specs`; wall and CPU seconds, episodes and generated tokens."""
    start, cpu = time.perf_counter(), time.process_time()
    episodes = env.rollout(policy, specs, max_batch_size=1 if one_at_a_time else None)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    tokens = sum(len(r.completion_ids or []) for ep in episodes for r in ep.replies)
    return {"wall_s": wall, "cpu_s": cpu, "episodes": len(episodes), "tokens": tokens}


def _pin_threads() -> dict:
    """Fix torch's thread counts for the whole run and report them."""
    threads = int(os.environ.get("WANDER_BENCH_THREADS", "1"))
    torch.set_num_threads(threads)
    try:  # generation never runs ops in parallel; settable only before torch's first parallel work
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    return {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}


def _summary(rounds: list[dict]) -> dict:
    """Medians over rounds (and every round) of tokens/s per wall and CPU second, episodes/s and the speed-up."""
    out: dict = {}
    for key in rounds[0]:
        out[f"{key}_rounds"] = [round(r[key], 2) for r in rounds]
        out[key] = round(statistics.median(r[key] for r in rounds), 2)
    return out


def run() -> dict:
    """Generated tokens per second, batched and sequential, fast decoder and `generate`, with the speed-ups."""
    threads = _pin_threads()
    env = load_environment("tictactoe", num_eval=GAMES, max_turns=4)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        path = build_scratch_model(env.corpus(), f"{tmp}/model")
        specs = env.get_dataset("eval").to_list()
        policies = {
            name: TransformersPolicy.from_pretrained(
                path, greedy=True, max_new_tokens=MAX_NEW_TOKENS, fast_greedy=fast
            )
            for name, fast in DECODERS.items()
        }
        _play(env, policies["fast"], specs[:8], one_at_a_time=False)  # warm-up: first calls allocate and load
        rounds: dict[str, list[dict]] = {name: [] for name in DECODERS}
        for _ in range(ROUNDS):
            for name, policy in policies.items():
                batched = _play(env, policy, specs[:GAMES], one_at_a_time=False)
                sequential = _play(env, policy, specs[:SEQUENTIAL_GAMES], one_at_a_time=True)
                rounds[name].append(
                    {
                        "batched_tokens_per_s": batched["tokens"] / batched["wall_s"],
                        "sequential_tokens_per_s": sequential["tokens"] / sequential["wall_s"],
                        "batched_speedup": (batched["episodes"] / batched["wall_s"])
                        / (sequential["episodes"] / sequential["wall_s"]),
                        "batched_tokens_per_cpu_s": batched["tokens"] / batched["cpu_s"],
                        "sequential_tokens_per_cpu_s": sequential["tokens"] / sequential["cpu_s"],
                        "batched_episodes_per_s": batched["episodes"] / batched["wall_s"],
                        # CPU seconds per wall second: near 1 when the round had its core, lower when it waited.
                        "batched_cpu_share": batched["cpu_s"] / batched["wall_s"],
                        "batched_tokens": batched["tokens"],
                    }
                )
    out = _summary(rounds["fast"])
    out["generate"] = _summary(rounds["generate"])
    out["fast_over_generate_batched"] = round(
        statistics.median(
            f["batched_tokens_per_s"] / g["batched_tokens_per_s"]
            for f, g in zip(rounds["fast"], rounds["generate"], strict=True)
        ),
        2,
    )
    out["threads"] = threads
    out["load_average_1min"] = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}
    out["target"] = {"batched_speedup": 10.0, "batched_tokens_per_s": 8000}
    out["model"] = "untrained scratch model (rambles to max_new_tokens)"
    out["games"] = {
        "batched": GAMES,
        "sequential": SEQUENTIAL_GAMES,
        "max_new_tokens": MAX_NEW_TOKENS,
        "rounds": ROUNDS,
    }
    return out
