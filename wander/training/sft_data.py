"""SFT data from trajectories: one row per kept episode, its whole conversation, for assistant-only loss."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from datasets import Dataset

from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.training.args import replace_args
from wander.training.episode_data import spec_order
from wander.training.sft_data_config import SFTDataConfig

EpisodeFilter = Callable[[Episode], bool]


def _value(episode: Episode, name: str) -> float:
    if name not in episode.values:
        raise KeyError(
            f"this filter reads the rubric value {name!r}, which the episode does not have (its values: "
            f"{sorted(episode.values)}); use a filter that fits this env's rubric"
        )
    return episode.values[name]


def no_error(episode: Episode) -> bool:
    """The episode ran and scored without an exception."""
    return episode.error is None


def not_lost(episode: Episode) -> bool:
    """The episode was not lost (rubric value `loss` is 0)."""
    return _value(episode, "loss") == 0


def no_invalid_moves(episode: Episode) -> bool:
    """No invalid move (rubric value `invalid_moves` is 0)."""
    return _value(episode, "invalid_moves") == 0


def well_formatted(episode: Episode) -> bool:
    """Every model turn was well formed (rubric value `format` is 1)."""
    return _value(episode, "format") == 1.0


def finished(episode: Episode) -> bool:
    """The episode ended by the env's rules, not by running out of turns or tokens."""
    return not episode.state.get("truncated") and bool(episode.state.get("done"))


FILTERS: dict[str, EpisodeFilter] = {
    f.__name__: f for f in (no_error, not_lost, no_invalid_moves, well_formatted, finished)
}


def resolve_filters(filters: Iterable[str | EpisodeFilter]) -> list[EpisodeFilter]:
    """Filter callables from names (see FILTERS) or callables."""
    out = []
    for f in filters:
        if isinstance(f, str):
            if f not in FILTERS:
                raise ValueError(
                    f"unknown episode filter {f!r}; known: {sorted(FILTERS)}, or pass a callable"
                )
            f = FILTERS[f]
        out.append(f)
    return out


def keep(episode: Episode, filters: Sequence[EpisodeFilter]) -> bool:
    """Whether an episode passes every filter."""
    return all(f(episode) for f in filters)


def sft_rows(
    episodes: Iterable[Episode], filters: Iterable[str | EpisodeFilter] = (), env: Environment | None = None
) -> list[dict[str, Any]]:
    """Rows of the kept episodes: the whole conversation as played, or with `env`, its `training_conversations`
    (one row per model turn when the env's turns read only the current observation)."""
    predicates = resolve_filters(filters)
    kept = [[dict(m) for m in ep.messages] for ep in episodes if keep(ep, predicates)]
    if env is None:
        return [{"messages": messages} for messages in kept]
    return [{"messages": c} for messages in kept for c in env.training_conversations(messages)]


def play_teacher(env: Environment, config: SFTDataConfig) -> list[Episode]:
    """The teacher's episodes over `num_episodes` specs of the split, in stratified order."""
    teacher = config.teacher
    if isinstance(teacher, str):
        from wander.policies.loading import make_policy

        teacher = make_policy(teacher, seed=config.seed, env=env)
    specs = spec_order(env, config.split, config.num_episodes, config.seed)
    return env.rollout(teacher, specs, max_batch_size=config.max_batch_size)


def sft_dataset(env: Environment, config: SFTDataConfig | None = None) -> Dataset:
    """The SFT dataset of an env: the teacher's kept episodes, one conversation per row."""
    config = config or SFTDataConfig()
    rows = sft_rows(play_teacher(env, config), config.filters, env)
    if not rows:
        raise ValueError(
            f"no episode of {config.num_episodes} passed the filters {list(config.to_dict()['filters'])}; "
            "a stronger teacher, more episodes or looser filters are needed"
        )
    return Dataset.from_list(rows)


def sft_trainer(
    env: Environment,
    trainer_cls: type,
    *,
    model: Any,
    args: Any = None,
    data: SFTDataConfig | None = None,
    **kwargs: Any,
) -> Any:
    """An SFTTrainer on the env's filtered teacher trajectories, with assistant-only loss."""
    from trl import SFTConfig

    if kwargs.get("train_dataset") is not None:
        raise ValueError(
            "train_dataset is built from the environment; configure it with data=SFTDataConfig(...)"
        )
    args = args if args is not None else SFTConfig(output_dir=f"{env.name}-sft")
    # The model reads the environment's turns but learns only its own (end-of-turn token included).
    args = replace_args(args, assistant_only_loss=True)
    return trainer_cls(model=model, args=args, train_dataset=sft_dataset(env, data), **kwargs)
