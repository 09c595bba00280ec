"""The embedded teacher: an OpenAI-compatible server that plays tic-tac-toe like a good LLM.

Its default skill is calibrated like the published teacher of the case study (gpt-5-mini:
vs optimal 0/76/24, vs random 90/9/1 W/D/L %). Measured over 4,000 games each with
`ExpertPlayer(0.5)`: vs minimax p=0 about 0/74/26, vs random about 84/14/2 (minimax itself
wins only ~86% against random, since its ties ignore the opponent's weakness).
"""

from __future__ import annotations

from fastapi import FastAPI

from envs.policies.openai_server import create_app
from envs.tictactoe.players import ExpertPlayer

TEACHER_SKILL = 0.5
TEACHER_MODEL = "tictactoe-teacher"


def teacher_app(random_move_prob: float = TEACHER_SKILL, model_name: str = TEACHER_MODEL) -> FastAPI:
    """The teacher as a FastAPI app speaking the OpenAI Chat Completions protocol."""
    if not 0.0 <= random_move_prob <= 1.0:
        raise ValueError(f"teacher skill (random_move_prob) must be within [0, 1], got {random_move_prob}")
    return create_app(lambda seed: ExpertPlayer(random_move_prob=random_move_prob, seed=seed), model_name)
