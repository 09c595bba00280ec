"""`make bench`: measure the project's speed targets and write bench/results.json."""

from __future__ import annotations

import importlib
import json
import os
import platform
import sys
import time
from pathlib import Path

# Each entry is a module with `run() -> dict`; a missing one is reported, not fatal.
SUITES = [
    "bench.env_speed",
    "bench.policy_speed",
    "bench.eval_speed",
    "bench.pipeline_speed",
    "bench.stage_startup",
    "bench.remote_speed",
    "bench.vllm_speed",
    "bench.chat_model_speed",
    "bench.precision_speed",
    "bench.team_speed",
    "bench.process_speed",
    "bench.sandbox_speed",
    "bench.chess_speed",
]
RESULTS = Path(__file__).with_name("results.json")


def main(selected: list[str]) -> None:
    """Run the suites (all, or those named on the command line) and merge into results.json."""
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for name in selected or SUITES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            print(f"{name}: skipped ({exc})")
            continue
        start = time.perf_counter()
        out = module.run()
        out["bench_wall_s"] = round(time.perf_counter() - start, 2)
        results[name.split(".")[-1]] = out
        print(name, json.dumps(out, indent=2))
    results["machine"] = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
    }
    tmp = RESULTS.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=2) + "\n")
    os.replace(tmp, RESULTS)
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main(sys.argv[1:])
