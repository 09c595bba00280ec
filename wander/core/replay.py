"""Replay a recorded episode through its environment: the verifier of recorded games (curation's gate).

A record (`Episode.to_dict()`, e.g. a line of the teacher's `episodes.jsonl`) says what was played and what came
of it. Replaying its assistant messages through a fresh episode of the same spec must give back every message of
the record, the same outcome state and the same rubric values and reward; any difference is a problem that names
the message or the field, so an edited board, a move the environment refuses or a relabelled outcome is caught.
What the env measures on the machine (`Environment.measured_keys`: the seconds code ran) is not compared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.core.policy import Reply

SHOWN = 80  # characters of a message quoted in a problem


def _quote(text: object) -> str:
    text = str(text)
    return repr(text if len(text) <= SHOWN else text[:SHOWN] + "...")


def _same(a: object, b: object) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def _after(messages: list, index: int) -> str:
    """Which model reply the environment was answering at `index`, when it was one."""
    if index > 0 and messages[index - 1]["role"] == "assistant":
        return f", its answer to the reply at message {index - 1}, {_quote(messages[index - 1]['content'])}"
    return ""


def replay(env: Environment, record: Mapping) -> tuple[Episode | None, list[str]]:
    """`record`'s assistant messages played again through a fresh episode of its spec in `env`, scored; the episode
    (None when the record cannot be started) and where the environment's answers differ from the record's
    (empty when they all agree). The replay stops at the first difference, as the environment goes on from there
    with messages the record does not hold."""
    spec, messages = record.get("spec"), record.get("messages")
    if not isinstance(spec, Mapping):
        return None, ["the record has no 'spec' object to replay from"]
    if not isinstance(messages, list) or not all(
        isinstance(m, Mapping) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in messages
    ):
        return None, ["'messages' is not a list of {role, content} strings"]
    try:
        episode = env.start(dict(spec))
    except Exception as e:  # noqa: BLE001 - a spec the env refuses is a problem of the record
        return None, [f"the environment cannot start from the spec: {type(e).__name__}: {e}"]
    problems = _replay_messages(env, episode, messages)
    env.score([episode])
    return episode, problems


def _replay_messages(env: Environment, episode: Episode, messages: list) -> list[str]:
    """Advance `episode` by the record's assistant messages; the first place its messages and the record's differ."""
    for index, message in enumerate(messages):
        if index >= len(episode.messages):
            if episode.done:
                return [f"message {index} ({message['role']}) comes after the game is over"]
            if message["role"] != "assistant":
                return [f"message {index} is a {message['role']} message where the model's move is due"]
            env.advance(episode, Reply(message["content"]))
            if episode.error:
                return [f"message {index} breaks the environment: {episode.error}"]
            continue
        played = episode.messages[index]
        if (played["role"], played["content"]) != (message["role"], message["content"]):
            return [
                f"message {index} ({message['role']}) is {_quote(message['content'])} but the environment "
                f"says ({played['role']}) {_quote(played['content'])}{_after(messages, index)}"
            ]
    if len(episode.messages) > len(messages):
        extra = episode.messages[len(messages)]
        return [
            f"the record ends after {len(messages)} messages but the environment goes on with ({extra['role']}) "
            f"{_quote(extra['content'])}{_after(messages, len(messages))}"
        ]
    if not episode.done:
        return [f"the game is not over after its {len(messages)} messages; the record is cut short"]
    return []


def replay_problems(env: Environment, record: Mapping) -> list[str]:
    """What in `record` differs from replaying its assistant messages through `env` (empty when nothing does)."""
    episode, problems = replay(env, record)
    if problems:
        return problems
    problems = []
    recorded_state = record.get("state") or {}
    for key, value in episode.to_dict()["state"].items():
        if key in recorded_state and key not in env.measured_keys and not _same(recorded_state[key], value):
            problems.append(
                f"state {key!r} is recorded as {recorded_state[key]!r}, the environment says {value!r}"
            )
    recorded_values = record.get("values") or {}
    for name, value in episode.values.items():
        if name not in recorded_values:
            problems.append(f"rubric value {name!r} is missing (the environment says {value!r})")
        elif name not in env.measured_keys and not _same(recorded_values[name], value):
            problems.append(
                f"rubric value {name!r} is recorded as {recorded_values[name]!r}, the environment says {value!r}"
            )
    if "reward" in record and not _same(record["reward"], episode.reward):
        problems.append(
            f"reward is recorded as {record['reward']!r}, the environment says {episode.reward!r}"
        )
    if record.get("error") != episode.error:
        problems.append(
            f"error is recorded as {record.get('error')!r}, the environment says {episode.error!r}"
        )
    return problems
