"""Engine calls per second and env steps per second of the chess env (envs/chess), on this machine.

Engine: the judge's search (`EnginePool.best` at the env's `judge_nodes`) over POSITIONS distinct positions of random
games, so no answer comes from the cache; one engine, then two engines on two threads. Env: GAMES games of the
embedded teacher against the env's opponents, played as one batch, the steps one after another and then on threads
(`steps_block`): model moves per second, and searches per model move (the judge's, the opponent's; the teacher's own
move is the judge's cached best).
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor

import chess

POSITIONS = 200
GAMES = 32


def positions(count: int, seed: int = 0) -> list[str]:
    """FENs of `count` distinct positions with legal moves, from random games."""
    rng, found = random.Random(seed), {}
    while len(found) < count:
        board = chess.Board()
        for _ in range(rng.randint(1, 60)):
            if board.is_game_over():
                break
            board.push(rng.choice(sorted(board.legal_moves, key=chess.Move.uci)))
        if not board.is_game_over():
            found[board.fen()] = None
    return list(found)


def engine_calls(nodes: int) -> tuple[float, float]:
    """Searches per second at `nodes`, one engine, then two engines on two threads (fresh positions each time)."""
    from envs.chess.engine import EnginePool

    rates = []
    for engines, seed in ((1, 0), (2, 1)):
        pool, fens = EnginePool(size=engines), positions(POSITIONS, seed)
        pool.best(chess.STARTING_FEN, nodes)  # the engines' start-up is not the rate
        start = time.perf_counter()
        with ThreadPoolExecutor(engines) as threads:
            list(threads.map(pool.best, fens, [nodes] * len(fens)))
        rates.append(POSITIONS / (time.perf_counter() - start))
        pool.close()
    return rates[0], rates[1]


def env_steps() -> dict:
    """Model moves per second of GAMES teacher games, steps one after another and on threads; searches per move."""
    from envs.chess import engine, load_environment

    out = {}
    for blocks in (False, True):
        engine._cache.clear()  # the same games twice: the second would be all cache hits
        env = load_environment(num_train=GAMES, num_eval=1, num_test=1)
        env.steps_block = blocks
        start = time.perf_counter()
        episodes = env.rollout(env.teacher_policy(env.teacher_skill, seed=0), list(env.get_dataset("train")))
        seconds = time.perf_counter() - start
        assert not any(e.error for e in episodes)
        moves = sum(e.state["turn"] for e in episodes)
        out["threads" if blocks else "one_by_one"] = (moves / seconds, env.pool.calls / moves)
        env.close()
    return out


def run() -> dict:
    """Engine searches/s at the judge's budget (1 and 2 engines) and env model moves/s (one by one, on threads)."""
    from envs.chess import ChessConfig

    nodes = ChessConfig().judge_nodes
    one, two = engine_calls(nodes)
    steps = env_steps()
    return {
        "judge_nodes": nodes,
        "engine_searches_per_s_one_engine": round(one, 1),
        "engine_searches_per_s_two_engines": round(two, 1),
        "env_moves_per_s_one_by_one": round(steps["one_by_one"][0], 1),
        "env_moves_per_s_on_threads": round(steps["threads"][0], 1),
        "env_threads_speedup": round(steps["threads"][0] / steps["one_by_one"][0], 2),
        "searches_per_model_move": round(steps["threads"][1], 2),
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
