"""Executions per second of the sandbox (wander/core/sandbox.py) and its overhead over a bare subprocess.

The same short program (`python3 -I -c` of a sum) run RUNS times one after another, bare (`subprocess.run`) and in
the sandbox (bubblewrap namespaces, limits, the private folder), then RUNS times through a sandbox that runs two at
once: what an env that checks a model's code pays per execution on this machine.
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
    return {
        "bare_per_s": per_second(bare),
        "sandbox_per_s": per_second(boxed),
        "sandbox_two_at_once_per_s": per_second(two),
        "overhead_ms": round((boxed - bare) / RUNS * 1000, 1),
        "sandbox_over_bare_time": round(boxed / bare, 2),
    }


if __name__ == "__main__":
    print(run())
