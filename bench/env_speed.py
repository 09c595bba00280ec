"""How fast the environment itself is: game steps and parse calls per second, on one core."""

from __future__ import annotations

import gc
import statistics
import time

from envs.tictactoe.board import STATES, legal_moves
from envs.tictactoe.players import rationale
from wander import XMLParser, load_environment

# The agent's replies, made before timing so only the environment is measured.
ACTIONS = {
    b: f"<think>{rationale(b, b.index('.'))}</think>\n<move>{b.index('.')}</move>"
    for b in STATES
    if legal_moves(b)
}
# Games between clock reads: reading the process clock is a system call, about 2% of a game's cost.
CLOCK_EVERY = 100


def env_steps_per_second(rounds: int = 5, seconds: float = 1.0) -> dict:
    """Whole games through reset/step against minimax (p=0.3); the agent takes the first empty cell.

    Replies vary with the board (the expert's rationale) so parsing sees many distinct texts. Reports the best
    of `rounds` timed rounds, as timeit does (other load on the machine only ever adds time), and the median.
    """
    env = load_environment("tictactoe", random_move_prob=(0.3, 0.3))
    rates, games = [], 0
    gc.disable()  # as timeit does: the collector's pauses belong to the process, not the env
    try:
        for _ in range(rounds):
            steps = 0
            start = time.process_time()
            while time.process_time() - start < seconds:
                for _ in range(CLOCK_EVERY):
                    env.reset(seed=games)
                    done = False
                    while not done:
                        _, _, done, _ = env.step(ACTIONS[env.episode.state["board"]])
                        steps += 1
                    games += 1
            rates.append(steps / (time.process_time() - start))
    finally:
        gc.enable()
    return {"env_steps_per_s": max(rates), "env_steps_per_s_median": statistics.median(rates), "games": games}


def parse_calls_per_second(calls: int = 200_000) -> dict:
    """XMLParser.parse on a typical reply."""
    parser = XMLParser(("think", "move"), answer_field="move")
    text = "<think>The center is the strongest open cell.</think>\n<move>4</move>"
    start = time.process_time()
    for _ in range(calls):
        parser.parse(text)
    return {"parse_calls_per_s": calls / (time.process_time() - start)}


def run() -> dict:
    """Both measurements, with their targets."""
    return {**env_steps_per_second(), **parse_calls_per_second(), "target_env_steps_per_s": 100_000}
