"""reasoning-gym's side of the env: which tasks exist, a task's difficulty levels (its own curriculum), one entry of a
task at a level from a seed (its own generator), and an answer's score (its own `score_answer`).

Nothing here knows wander: an entry is reasoning-gym's dict (`question`, `answer`, `metadata`), a score its float.
"""

from __future__ import annotations

import functools
import json
import random
import warnings
from collections.abc import Mapping
from typing import Any

Mix = dict[str, float]
"""Task name -> weight (the share of episodes drawn from it, before normalising)."""


def _gym():
    """reasoning_gym, imported on first use (~3 s), its dependencies' import-time warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # cellpylib's `is "recursive"`
        import reasoning_gym
        import reasoning_gym.factory

    return reasoning_gym


@functools.cache
def task_names() -> tuple[str, ...]:
    """Every task reasoning-gym registers, sorted."""
    return tuple(sorted(_gym().factory.DATASETS))


def parse_mix(tasks: str | list | Mapping) -> Mix:
    """`tasks` as a mix: a name, "a,b" or "a:2,b:1", a list of names (equal weights) or a mapping name -> weight.
    An unknown name or a weight that is not positive is refused with the names there are."""
    if isinstance(tasks, str):
        pairs = [part.partition(":") for part in tasks.split(",") if part.strip()]
        mix = {name.strip(): float(weight) if weight.strip() else 1.0 for name, _, weight in pairs}
    elif isinstance(tasks, Mapping):
        mix = {str(name): float(weight) for name, weight in tasks.items()}
    else:
        mix = {str(name): 1.0 for name in tasks}
    if not mix:
        raise ValueError("reasoning_gym: tasks names no task; name one or more of reasoning-gym's tasks")
    unknown = [name for name in mix if name not in task_names()]
    if unknown:
        raise ValueError(
            f"reasoning_gym: no task named {', '.join(map(repr, unknown))} in reasoning-gym "
            f"{_gym().__version__}; its tasks are: {', '.join(task_names())}"
        )
    bad = {name: w for name, w in mix.items() if not w > 0}
    if bad:
        raise ValueError(f"reasoning_gym: task weights must be positive, got {bad}")
    return mix


def draw_task(mix: Mix, seed: int) -> str:
    """The task of the episode with `seed`, drawn by weight (a pure function of the seed)."""
    names = sorted(mix)
    return random.Random(f"reasoning_gym:{seed}").choices(names, weights=[mix[n] for n in names])[0]


INDEXED_SIZE = 2**32  # a generator's virtual size: every seed of the splits is an index of it


@functools.cache
def _curriculum(task: str) -> bool:
    """Whether `task` has a curriculum whose easiest level reasoning-gym accepts (knight_swap's does not)."""
    factory = _gym().factory
    if not factory.has_curriculum(task):
        return False
    try:
        _config(task, 0, seed=0, size=1, curriculum=True)
    except (AssertionError, ValueError):
        return False
    return True


@functools.cache
def levels(task: str) -> int:
    """How many difficulty levels of its curriculum `task` can be generated at (1 for a task without one): the
    levels from 0 up whose configuration reasoning-gym accepts."""
    if not _curriculum(task):
        return 1
    attributes = _gym().factory.create_curriculum(task).attributes
    usable = 1
    for level in range(1, max((len(a.levels) for a in attributes.values()), default=1)):
        try:
            _config(task, level, seed=0, size=1, curriculum=True)
        except (AssertionError, ValueError):  # reasoning-gym's own validation refuses this level's values
            break
        usable = level + 1
    return usable


def _config(task: str, level: int, seed: int, size: int, curriculum: bool | None = None) -> dict[str, Any]:
    """The keyword arguments of `create_dataset` for `task` at `level`: its curriculum's configuration there (each
    attribute at that level or its last), or the task's defaults where it has no usable curriculum."""
    if not (_curriculum(task) if curriculum is None else curriculum):
        return {"seed": seed, "size": size}
    course = _gym().factory.create_curriculum(task)
    for name, attribute in course.attributes.items():
        course.set_attr_level(name, min(level, len(attribute.levels) - 1))
    config = course.generate_configuration({"seed": seed, "size": size})
    if callable(
        getattr(config, "validate", None)
    ):  # most configs check their values; power_function's has none
        config.validate()
    return dict(vars(config))


@functools.cache
def _generator(task: str, level: int):
    """One generator of `task` at `level` whose index is the seed, or None where reasoning-gym refuses so large a
    size (word_ladder): then each entry builds its own (slower where a generator loads a word list)."""
    try:
        return _gym().create_dataset(task, **_config(task, level, seed=0, size=INDEXED_SIZE))
    except (AssertionError, ValueError):
        return None


def make_entry(task: str, level: int, seed: int) -> dict[str, Any]:
    """reasoning-gym's entry of `task` at difficulty `level` (capped at its last) from `seed`: question, answer,
    metadata (a pure function of the three: reasoning-gym seeds an item's random numbers from its index)."""
    level = min(level, levels(task) - 1)
    generator = _generator(task, level)
    if generator is not None:
        return generator[seed]
    return _gym().create_dataset(task, **_config(task, level, seed=seed, size=1))[0]


def score(task: str, level: int, answer: str | None, entry: Mapping[str, Any]) -> float:
    """reasoning-gym's own score of `answer` for `entry`, in [0, 1]."""
    level = min(level, levels(task) - 1)
    scorer = _generator(task, level) or _gym().create_dataset(task, **_config(task, level, seed=0, size=1))
    entry = {"question": entry["question"], "answer": entry["answer"], "metadata": _metadata(entry)}
    return float(scorer.score_answer(answer, entry))


def _metadata(entry: Mapping[str, Any]) -> dict:
    metadata = entry.get("metadata") or {}
    return json.loads(metadata) if isinstance(metadata, str) else dict(metadata)
