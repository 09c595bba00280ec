"""Rubric: weighted reward functions plus zero-weight metrics, each reported separately."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

# What a reward function may declare; it receives exactly the ones it names (or all via **kwargs).
SCORING_ARGS = ("prompt", "completion", "state", "answer", "info", "parser")


@dataclass
class Score:
    """One episode's score: total reward, every function's value, and the error if one raised."""

    reward: float
    values: dict[str, float]
    error: str | None = None


@dataclass(slots=True)
class _Func:
    name: str
    func: Callable
    weight: float
    is_async: bool
    signature: int  # index of the arguments it declares among the rubric's distinct signatures


@dataclass
class Rubric:
    """Weighted reward functions (weight > 0 or < 0) and metrics (weight 0)."""

    funcs: list[Callable] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    parser: object | None = None

    def __post_init__(self) -> None:
        if len(self.weights) != len(self.funcs):
            raise ValueError(f"Rubric got {len(self.funcs)} functions but {len(self.weights)} weights")
        pairs = list(zip(self.funcs, self.weights, strict=True))
        self.funcs, self.weights, self._entries = [], [], []
        self._signatures: list[tuple[str, ...]] = []
        for func, weight in pairs:
            self.add(func, weight)

    def add(self, func: Callable, weight: float = 1.0, name: str | None = None) -> None:
        """Add a reward function (or a metric with weight 0)."""
        name = name or getattr(func, "__name__", type(func).__name__)
        if any(e.name == name for e in self._entries):
            raise ValueError(f"Rubric already has a function named {name!r}; pass name= to rename it")
        params = inspect.signature(func).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            wants = SCORING_ARGS
        else:
            wants = tuple(a for a in SCORING_ARGS if a in params)
        is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)
        if wants not in self._signatures:
            self._signatures.append(wants)
        self.funcs.append(func)
        self.weights.append(weight)
        self._entries.append(_Func(name, func, weight, is_async, self._signatures.index(wants)))

    @property
    def names(self) -> list[str]:
        """Names of every function, in order."""
        return [e.name for e in self._entries]

    def score(self, episodes: Sequence[dict]) -> list[Score]:
        """Score episodes given as dicts of SCORING_ARGS; runs async functions concurrently."""
        pending: list[tuple[int, _Func, object]] = []
        raw: list[dict[str, float]] = [{} for _ in episodes]
        errors: list[str | None] = [None] * len(episodes)
        for i, ep in enumerate(episodes):
            get = ep.get
            args = {
                "prompt": get("prompt"),
                "completion": get("completion"),
                "state": get("state"),
                "answer": get("answer"),
                "info": get("info"),
                "parser": self.parser,
            }
            # One kwargs dict per distinct signature, not per function.
            by_signature = [
                args if wants == SCORING_ARGS else {k: args[k] for k in wants} for wants in self._signatures
            ]
            values = raw[i]
            for e in self._entries:
                try:
                    result = e.func(**by_signature[e.signature])
                    if result.__class__ is float:  # the common case, skipping the costlier checks
                        values[e.name] = result
                    elif e.is_async or inspect.isawaitable(result):
                        pending.append((i, e, result))
                    else:
                        values[e.name] = float(result)
                except Exception as exc:  # noqa: BLE001 - one bad episode must not crash the batch
                    errors[i] = errors[i] or f"{e.name}: {type(exc).__name__}: {exc}"
        if pending:
            results = _run(_gather([p[2] for p in pending]))
            for (i, e, _), result in zip(pending, results, strict=True):
                if isinstance(result, BaseException):
                    errors[i] = errors[i] or f"{e.name}: {type(result).__name__}: {result}"
                else:
                    try:
                        raw[i][e.name] = float(result)
                    except (TypeError, ValueError) as exc:
                        errors[i] = errors[i] or f"{e.name}: returned {result!r}: {exc}"
        scores = []
        for values, error in zip(raw, errors, strict=True):
            # An errored episode keeps the values that did compute but earns no reward.
            reward = 0.0
            if not error:
                for e in self._entries:
                    if e.weight:  # metrics (weight 0) never count, whatever value they report
                        reward += e.weight * values[e.name]
            scores.append(Score(reward=reward, values=values, error=error))
        return scores


async def _gather(awaitables: list) -> list:
    return await asyncio.gather(*awaitables, return_exceptions=True)


def _run(awaitable):
    """Run a coroutine whether or not an event loop is already running in this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(awaitable)
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, awaitable).result()
