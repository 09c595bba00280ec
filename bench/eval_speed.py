"""How fast the opponent matrix runs: games per second for the scratch model (greedy) and for a scripted player."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from wander import load_environment
from wander.eval.config import EvaluateConfig
from wander.eval.matrix import run_matrix
from wander.policies.scratch_model import build_scratch_model
from wander.policies.scratch_model_config import ScratchModelConfig


def matrix_speed(spec: str, games_per_cell: int) -> dict:
    """Wall time of the whole matrix (5 opponents x 2 sides) for one policy, model loading included."""
    config = EvaluateConfig(
        baseline=None, policies={"bench": spec}, references=[], games=games_per_cell, progress=False
    )
    start = time.perf_counter()
    result = run_matrix(config)
    seconds = time.perf_counter() - start
    episodes = result.episodes["bench"]
    turns = sum(ep.state["turn"] for ep in episodes)
    return {
        "games": len(episodes),
        "seconds": round(seconds, 2),
        "games_per_s": round(len(episodes) / seconds, 3),
        "model_turns_per_s": round(turns / seconds, 2),
        "mean_turns": round(turns / len(episodes), 2),
    }


def run(games_per_cell: int = 16) -> dict:
    """The scratch model (default size, untrained: the worst case, every game runs out of turns) and minimax."""
    with tempfile.TemporaryDirectory() as tmp:
        corpus = load_environment("tictactoe").corpus()
        path = build_scratch_model(corpus, Path(tmp) / "scratch", ScratchModelConfig())
        model = matrix_speed(str(path), games_per_cell)
    scripted = matrix_speed("minimax", 200)
    return {
        "eval_games_per_s": model["games_per_s"],
        "scratch_model": {
            **model,
            "games_per_cell": games_per_cell,
            "decoding": "greedy",
            "max_new_tokens": 64,
        },
        "scripted_minimax_games_per_s": scripted["games_per_s"],
    }


if __name__ == "__main__":
    print(run())
