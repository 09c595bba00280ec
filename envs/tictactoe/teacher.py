"""The embedded teacher's skill: `ExpertPlayer` slipping to a random move, served by `wander teacher` like a good LLM.

Its default skill is calibrated like the published teacher of the case study (gpt-5-mini:
vs optimal 0/76/24, vs random 90/9/1 W/D/L %). Measured over 4,000 games each with
`ExpertPlayer(0.5)`: vs minimax p=0 about 0/74/26, vs random about 84/14/2 (minimax itself
wins only ~86% against random, since its ties ignore the opponent's weakness).
"""

TEACHER_SKILL = 0.5
"""The teacher's default slip rate (random-move probability in quiet positions)."""
