"""Episodes (trajectories) and their aggregation into metrics with confidence intervals."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from wander.core.policy import Message, Reply
from wander.core.stats import mean_ci

ATOMS = (str, int, float, bool, type(None))  # state values a fork can share


@dataclass(slots=True)
class Episode:
    """One played episode: its spec, the whole conversation, state, and per-function scores."""

    spec: dict
    messages: list[Message]
    state: dict
    prompt_len: int
    replies: list[Reply] = field(default_factory=list)
    done: bool = False
    reward: float = 0.0
    values: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    @property
    def seed(self) -> int | None:
        """The episode seed, when the spec has one."""
        return self.spec.get("seed")

    @property
    def prompt(self) -> list[Message]:
        """Messages before the first model turn."""
        return self.messages[: self.prompt_len]

    @property
    def completion(self) -> list[Message]:
        """Every message from the first model turn on (model and environment turns)."""
        return self.messages[self.prompt_len :]

    def scoring_inputs(self) -> dict:
        """What a rubric scores this episode from (`Rubric.score`'s SCORING_ARGS but the parser)."""
        return {
            "prompt": self.prompt,
            "completion": self.completion,
            "state": self.state,
            "answer": self.spec.get("answer"),
            "info": self.spec,
        }

    def fork(self) -> Episode:
        """An independent copy to branch from, much cheaper than `copy.deepcopy`: the state is deep-copied,
        the lists are new, and the messages and replies in them are shared (never changed once appended)."""
        return Episode(
            spec=dict(self.spec),
            messages=list(self.messages),
            state={k: v if isinstance(v, ATOMS) else copy.deepcopy(v) for k, v in self.state.items()},
            prompt_len=self.prompt_len,
            replies=list(self.replies),
            done=self.done,
            reward=self.reward,
            values=dict(self.values),
            error=self.error,
        )

    def to_dict(self) -> dict:
        """A JSON-ready record of the episode."""
        state = {
            k: v for k, v in self.state.items() if isinstance(v, (str, int, float, bool, list, type(None)))
        }
        return {
            "seed": self.seed,
            "spec": self.spec,
            "messages": self.messages,
            "reward": self.reward,
            "values": self.values,
            "state": state,
            "error": self.error,
        }


@dataclass
class EvalResult:
    """Trajectories of an evaluation and their aggregated metrics (mean, 95% CI, n)."""

    trajectories: list[Episode]
    metrics: dict[str, dict[str, float]]

    def summary(self) -> dict[str, float]:
        """Just the means, for a quick look."""
        return {name: m["mean"] for name, m in self.metrics.items()}


def aggregate(episodes: list[Episode], names: list[str]) -> dict[str, dict[str, float]]:
    """Mean and 95% interval of the reward and of every rubric function, plus the error rate."""
    metrics = {"reward": mean_ci([ep.reward for ep in episodes])}
    for name in names:
        metrics[name] = mean_ci([ep.values[name] for ep in episodes if name in ep.values])
    metrics["errored"] = mean_ci([float(ep.error is not None) for ep in episodes])
    return metrics
