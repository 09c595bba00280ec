"""The wire format of a wander environment served over OpenEnv: one action, one observation, one state model.

A wander episode is a conversation, so the action is the model's message and the observation carries the
messages the environment appended plus what the policy reads next (`Environment.observation`). The reward is the
rubric's total, sent once, on the step that ends the episode (OpenEnv's `reward`); every rubric value, the error
and the JSON-safe episode state ride along, so a client can rebuild the local `Episode` exactly.
"""

from __future__ import annotations

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
    state: dict[str, Any] = Field(default_factory=dict, description="The episode's JSON-safe state")


class WanderState(State):
    """The session's episode: its spec, turn and whether it is over."""

    spec: dict[str, Any] = Field(default_factory=dict, description="The episode spec being played")
    done: bool = Field(default=False, description="Whether the episode is over")
    environment: str = Field(default="", description="The wander environment's name")
