"""A local environment whose episodes are played on a server serving the same environment (`wander env serve`).

`load_environment("openenv:http://host:port", local=env)` returns a `ServedEnvironment`: `start` / `advance` go to
the server (one OpenEnv session per episode, as `RemoteEnvironment` plays them), and everything else is `env`'s:
its splits and `make_spec` (every episode is sent as its full spec, so the server's own splits and opponent range
are not used), its rubric weights (the reward is the weighted sum of the rubric values the server reports, so a
trainer's own weights, such as GRPO's invalid-move penalty, apply), its parser, corpus, learning-curve suite and
any attribute of its own (a solver that forces replies into local state stays local). An episode's record
(`Episode.to_dict()`) is the local one byte for byte: same messages, state in the same key order, values, reward.
The server never sends what the env declares private (`Environment.private_state_keys`); when the env has such keys,
scoring rebuilds them here by replaying the episode's spec and replies on the local env.

Construction checks that the server plays the same game: a wander server of the same environment name, rubric
names, turn limit and history mode, and, when both sides have a config dataclass, equal `episode_settings` (the
env's list of the settings that decide how an episode plays from its spec; all of them when it has no list). A
step the server fails to answer raises: a transport failure is not an episode outcome to record.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator
from typing import Any

from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.core.policy import Message
from wander.serve.client import RemoteEnvironment, RemoteError

logger = logging.getLogger(__name__)
BOOKKEEPING = ("session", "remote_reward", "remote_values", "prompt")  # the client's, not the env's, state


class SettingsMismatch(ValueError):
    """The server plays a different game than the local environment; the message names every difference."""


def _plain(value: Any) -> Any:
    # Settings as they travel in JSON (tuples become lists), so a local config compares with the server's.
    return json.loads(json.dumps(value, default=repr))


class ServedEnvironment(RemoteEnvironment):
    """`local`'s episodes played on the wander server at `url`; specs, weights and the rest stay `local`'s."""

    def __init__(self, url: str, local: Environment, *, timeout_s: float = 60.0):
        super().__init__(url, action_field="message", timeout_s=timeout_s)  # a wander server's, checked below
        self.local = local
        if not self.wander:
            raise SettingsMismatch(
                f"{self.shown_url} is an OpenEnv server but not a wander one (no /wander/info): serve the "
                f"environment with `wander env serve {local.name} ...`"
            )
        problems = self.differences(local)
        if problems:
            raise SettingsMismatch(
                f"the server at {self.shown_url} plays a different game than {local.name} here: "
                + "; ".join(problems)
            )
        self.rubric, self.parser, self.system_prompt = local.rubric, local.parser, local.system_prompt
        self.max_turns, self.name, self.full_history = local.max_turns, local.name, local.full_history
        self.private_spec_keys, self.private_state_keys = local.private_spec_keys, local.private_state_keys

    def differences(self, local: Environment) -> list[str]:
        """What the server reports that differs from `local` (empty when it plays the same game)."""
        info = self.info
        mine = {
            "name": local.name,
            "rubric": local.rubric.names,
            "max_turns": local.max_turns,
            "full_history": local.full_history,
        }
        problems = [
            f"{key} is {info.get(key)!r} there, {value!r} here"
            for key, value in mine.items()
            if info.get(key) != value
        ]
        config, settings = getattr(local, "config", None), info.get("settings")
        if dataclasses.is_dataclass(config):
            if settings is None:
                logger.warning(
                    "%s reports no settings: only its name, rubric, turn limit and history mode are checked",
                    self.shown_url,
                )
                return problems
            ours = _plain(dataclasses.asdict(config))
            keys = getattr(local, "episode_settings", None) or sorted(ours)
            problems += [
                f"setting {key} is {settings.get(key)!r} there, {ours.get(key)!r} here"
                for key in keys
                if settings.get(key) != ours.get(key)
            ]
        return problems

    def with_settings(self, **changes: Any) -> ServedEnvironment:
        """The same server with the local env rebuilt with `changes` in its config (a curriculum stage)."""
        config = dataclasses.replace(self.local.config, **changes)
        return ServedEnvironment(self.url, type(self.local)(config), timeout_s=self.timeout_s)

    # ----- what stays local -----

    def get_dataset(self, split: str = "train") -> Any:
        """The local env's specs of a split."""
        return self.local.get_dataset(split)

    @property
    def dataset(self) -> dict:
        """The local env's splits."""
        return self.local.dataset

    @dataset.setter
    def dataset(self, value: object) -> None:
        pass  # the local env owns the specs

    def make_spec(self, *args: Any, **kwargs: Any) -> dict:
        """The local env's spec for a seed."""
        return self.local.make_spec(*args, **kwargs)

    def corpus(self) -> Iterator[str]:
        """The local env's corpus."""
        return self.local.corpus()

    def training_conversations(self, messages: list[Message]) -> list[list[Message]]:
        """The local env's SFT conversations of a played episode."""
        return self.local.training_conversations(messages)

    def public_spec(self, spec: dict) -> dict:
        """The local env's public part of a spec."""
        return self.local.public_spec(spec)

    def public_state(self, state: dict) -> dict:
        """The local env's public part of a state."""
        return self.local.public_state(state)

    def curve_metrics(self, *args: Any, **kwargs: Any) -> dict[str, float]:
        """The local env's learning-curve suite (tic-tac-toe's is exact: it forces replies into local state)."""
        return self.local.curve_metrics(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # Only for attributes this object lacks (`config`, a solver, an expert): the local env's. So are the local
        # env's capabilities (wander/core/capabilities.py), and only those: `isinstance(served, ExpectedOutcomes)`
        # holds when the local env has them, and they compute over the local rules from the state the server
        # reported (tic-tac-toe forces the opponent's replies into local forks).
        if name == "local":
            raise AttributeError(name)
        return getattr(self.local, name)

    # ----- episodes: played on the server -----

    def _absorb(self, episode: Episode, payload: dict[str, Any]) -> None:
        super()._absorb(episode, payload)
        # The server's state is the local env's, in its key order: keep that order, so a record is byte-identical.
        state, order = episode.state, payload["observation"].get("state") or {}
        ordered = {key: state[key] for key in order if key in state}
        ordered.update((key, value) for key, value in state.items() if key not in ordered)
        state.clear()
        state.update(ordered)

    def _step_failed(self, episode: Episode, exc: RemoteError) -> None:
        raise RemoteError(
            f"a step on the {self.name} server failed, so the episode cannot be played as it would be here: {exc}"
        ) from exc

    def score(self, episodes: list[Episode]) -> None:
        """The server's rubric values; the reward weighted by the local rubric; the client's bookkeeping dropped."""
        super().score(episodes)  # closes the sessions
        names, weights = self.local.rubric.names, self.local.rubric.weights
        for ep in episodes:
            for key in BOOKKEEPING:
                ep.state.pop(key, None)
            self._restore_private_state(ep)
            if not ep.values and not ep.error:
                # Ended here before the server ended it (a trainer cut it at its token budget): the local rubric
                # scores the state the server reported, as it would have scored a local episode.
                self.local.score([ep])
                continue
            reward = 0.0  # summed in the rubric's order, as `Rubric.score` does: the same float
            if not ep.error:
                for name, weight in zip(names, weights, strict=True):
                    if weight:
                        reward += weight * ep.values[name]
            ep.reward = reward

    def _restore_private_state(self, episode: Episode) -> None:
        """Put back the state the server keeps to itself (the local env's private state keys), in the local key
        order, by replaying the episode's spec and replies here: a record, and a rubric scoring it here, see the
        whole state, as they would of a local episode."""
        if not self.local.private_state_keys:
            return  # nothing withheld: no replay (most envs, and every tic-tac-toe episode)
        shadow = self.local.start(episode.spec)
        for reply in episode.replies:
            if shadow.done:
                break
            self.local.advance(shadow, reply)
        # Every key the server did not send comes from the replay (the private ones, and any it could not send).
        state = episode.state
        merged = {key: state[key] if key in state else value for key, value in shadow.state.items()}
        merged.update((key, value) for key, value in state.items() if key not in merged)
        state.clear()
        state.update(merged)


def load_remote(url: str, **kwargs: Any) -> RemoteEnvironment:
    """`openenv:http://host:port` (or a bare URL) as a wander environment; with `local=env`, that local
    environment with its episodes played on the server (`ServedEnvironment`)."""
    if "local" in kwargs:
        return ServedEnvironment(url, **kwargs)
    return RemoteEnvironment(url, **kwargs)
