"""Which of reasoning-gym's tasks this env runs on this machine: `python -m envs.reasoning_gym.survey [--seconds S]`.

For every task of the registry: its usable curriculum levels, entries at levels 0-3 and 8 more, whether each has a
reference answer (the embedded teacher needs one) that the task's own scorer gives 1, and the milliseconds an
entry takes after the first; a task that takes more than `--seconds` is stopped. Prints one JSON line per task,
then the count the embedded teacher can play (docs/experiments/reasoning-gym.md has a run's table).
"""

from __future__ import annotations

import argparse
import json
import signal
import time

from envs.reasoning_gym.tasks import levels, make_entry, score, task_names


class _Slow(Exception):
    """The task took longer than the survey allows."""


def _stop(*_: object) -> None:
    raise _Slow


def survey_task(task: str, seconds: int) -> dict:
    """What this env gets from `task` here (stopped after `seconds`)."""
    signal.signal(signal.SIGALRM, _stop)
    signal.alarm(seconds)
    try:
        entries = [make_entry(task, k, 1_000_000 + k) for k in range(4)]
        start = time.perf_counter()
        entries += [make_entry(task, k % 4, 5_000 + k) for k in range(8)]
        ms = round((time.perf_counter() - start) / 8 * 1000, 1)
        referenced = all(e["answer"] is not None for e in entries)
        right = referenced and all(score(task, i % 4, e["answer"], e) == 1.0 for i, e in enumerate(entries))
        return {"task": task, "levels": levels(task), "ms": ms, "reference": referenced, "teacher": right}
    except _Slow:
        return {"task": task, "teacher": False, "error": f"more than {seconds} s"}
    except Exception as error:  # a generator that refuses its defaults: reported, not raised
        return {"task": task, "teacher": False, "error": f"{type(error).__name__}: {str(error)[:100]}"}
    finally:
        signal.alarm(0)


def main() -> None:
    """Survey every task and print the rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=20, help="the most a task may take")
    seconds = parser.parse_args().seconds
    rows = [survey_task(task, seconds) for task in task_names()]
    for row in rows:
        print(json.dumps(row))
    print(f"{sum(r['teacher'] for r in rows)} of {len(rows)} tasks have an embedded teacher here")


if __name__ == "__main__":
    main()
