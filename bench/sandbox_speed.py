"""Executions per second of the sandbox (wander/core/sandbox.py) and its overhead over a bare subprocess.

The same short program (`python3 -I -c` of a sum) run RUNS times one after another, bare (`subprocess.run`) and in
the sandbox (bubblewrap namespaces, limits, the private folder), then RUNS times through a sandbox that runs two at
once: what an env that checks a model's code pays per execution on this machine. Then the coding env's own unit of
work, a submission: a reference solution through `run_tests` (its function in a fresh sandbox, judged outside it) and
ruff's check of it, RUNS times. Last, RUNS episodes of the env's teacher (its slips and fixes included) played as
one batch, its steps one after another and then at once (`steps_block`: at most the sandbox's `parallel` runs at
a time).
"""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from wander.core.sandbox import Sandbox

RUNS = 40
PROGRAM = ["python3", "-I", "-c", "print(sum(range(1000)))"]


def per_second(seconds: float) -> float:
    """Executions per second of RUNS executions in `seconds`."""
    return round(RUNS / seconds, 1)


def run() -> dict:
    """Bare, sandboxed, and sandboxed two at a time: executions/s and the ratio."""
    start = time.perf_counter()
    for _ in range(RUNS):
        subprocess.run(PROGRAM, check=True, capture_output=True)
    bare = time.perf_counter() - start
    sandbox = Sandbox()
    start = time.perf_counter()
    for _ in range(RUNS):
        assert sandbox.run(PROGRAM).ok
    boxed = time.perf_counter() - start
    parallel = Sandbox(parallel=2)
    start = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        assert all(r.ok for r in pool.map(lambda _: parallel.run(PROGRAM), range(RUNS)))
    two = time.perf_counter() - start
    tests, lint = submissions()
    one_by_one, at_once = batch_steps()
    return {
        "bare_per_s": per_second(bare),
        "sandbox_per_s": per_second(boxed),
        "sandbox_two_at_once_per_s": per_second(two),
        "overhead_ms": round((boxed - bare) / RUNS * 1000, 1),
        "sandbox_over_bare_time": round(boxed / bare, 2),
        "coding_run_tests_per_s": per_second(tests),
        "coding_lint_per_s": per_second(lint),
        "coding_episodes_per_s_one_by_one": per_second(one_by_one),
        "coding_episodes_per_s_at_once": per_second(at_once),
        "coding_at_once_speedup": round(one_by_one / at_once, 2),
    }


def batch_steps() -> tuple[float, float]:
    """Seconds of RUNS teacher episodes in one rollout, stepped one after another, then at once."""
    from envs.coding import load_environment

    env = load_environment(num_train=RUNS, num_eval=1, num_test=1)
    specs = list(env.get_dataset("train"))
    seconds = []
    for blocks in (False, True):
        env.steps_block = blocks
        start = time.perf_counter()
        episodes = env.rollout(env.teacher_policy(env.teacher_skill, seed=0), specs)
        seconds.append(time.perf_counter() - start)
        assert not any(e.error for e in episodes)
    return seconds[0], seconds[1]


def submissions() -> tuple[float, float]:
    """Seconds of RUNS `run_tests` of reference solutions (one problem per stratum in turn), and of RUNS ruff checks."""
    from envs.coding import lint_findings, load_environment
    from envs.coding.execution import run_tests
    from envs.coding.problems import MAX_STRATA, make_problem

    env = load_environment(num_train=1, num_eval=1, num_test=1)
    problems = [make_problem(seed, seed % MAX_STRATA) for seed in range(RUNS)]
    start = time.perf_counter()
    for p in problems:
        tests = [[list(args), expected] for args, expected in p.tests]
        assert run_tests(env.sandbox, p.reference, p.entry_point, tests).all_passed
    tested = time.perf_counter() - start
    start = time.perf_counter()
    assert not any(lint_findings(p.reference) for p in problems)
    return tested, time.perf_counter() - start


if __name__ == "__main__":
    print(run())
