"""The wire format of a wander environment served over OpenEnv: one action, one observation, one state model.

A wander episode is a conversation, so the action is the model's message and the observation carries the
messages the environment appended plus what the policy reads next (`Environment.observation`). The reward is the
rubric's total, sent once, on the step that ends the episode (OpenEnv's `reward`); every rubric value, the error
and the JSON-safe public episode state ride along, so a client can rebuild the local `Episode`, less what the env
declares private (`Environment.private_spec_keys` / `private_state_keys`: those never leave the server).
"""

from __future__ import annotations

import math
from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

MAX_MESSAGE_CHARS = 65_536  # a model turn longer than this is a runaway generation, refused as invalid input


class WanderAction(Action):
    """One model turn: the assistant message's text."""

    message: str = Field(max_length=MAX_MESSAGE_CHARS, description="The model's reply (assistant message)")


class WanderObservation(Observation):
    """What the environment says after reset or a step."""

    messages: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Messages the environment appended: the opening messages on reset, its answer on a step",
    )
    prompt: list[dict[str, Any]] = Field(
        default_factory=list, description="What the policy reads before its next turn (empty once done)"
    )
    values: dict[str, float] = Field(
        default_factory=dict, description="Each rubric function's value, once the episode is done"
    )
    error: str | None = Field(default=None, description="Why the episode errored, if it did")
    state: dict[str, Any] = Field(default_factory=dict, description="The episode's JSON-safe public state")


class WanderState(State):
    """The session's episode: its spec, turn and whether it is over."""

    spec: dict[str, Any] = Field(
        default_factory=dict, description="The public part of the episode spec being played"
    )
    done: bool = Field(default=False, description="Whether the episode is over")
    environment: str = Field(default="", description="The wander environment's name")


def finite(value: float) -> float:
    """The value as a float JSON can carry: NaN and infinities become 0."""
    # JSON has no NaN/inf; a rubric that produced one gets a 0, as an errored episode does.
    value = float(value)
    return value if math.isfinite(value) else 0.0


_PLAIN = (str, int, bool, type(None))


def json_safe(value: Any) -> Any:
    """Plain JSON types only (tuples become lists, other objects their repr)."""
    # Every observation passes through here on every step, and it is almost always JSON-safe already (string-keyed
    # dicts and lists of strings and ints): checking is cheaper than rebuilding it.
    if _is_plain(value):
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, float):
        return finite(value)
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return repr(value)


def _is_plain(value: Any) -> bool:
    """Whether `value` is already what `json_safe` would return (no tuples, non-str keys, NaN or objects)."""
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and _is_plain(v) for k, v in value.items())
    if kind is list:
        return all(_is_plain(v) for v in value)
    if kind is float:
        return math.isfinite(value)
    return kind in _PLAIN
