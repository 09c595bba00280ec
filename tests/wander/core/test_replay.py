"""Replaying recorded games through the environment: a true record replays clean, every edit is named."""

from __future__ import annotations

import copy

import pytest

from envs.tictactoe import ExpertPlayer
from wander import load_environment
from wander.core.replay import replay_problems

ENV = {"name": "tictactoe", "rendering": "board", "max_turns": 8}


@pytest.fixture(scope="module")
def records() -> list[dict]:
    """Games of the expert teacher, as the synthesize stage records them (JSON-ready dicts)."""
    env = load_environment(**ENV)
    specs = [env.make_spec(seed) for seed in range(40)]
    return [ep.to_dict() for ep in env.rollout(ExpertPlayer(0.5, seed=1), specs)]


def first(records: list[dict], outcome: str) -> dict:
    return copy.deepcopy(next(r for r in records if r["state"]["outcome"] == outcome))


def test_true_records_replay_clean(records: list[dict]) -> None:
    env = load_environment(**ENV)
    assert {r["state"]["outcome"] for r in records} >= {"win", "draw", "loss"}
    assert all(replay_problems(env, r) == [] for r in records)


def test_an_edited_board_is_named(records: list[dict]) -> None:
    record = first(records, "win")
    i = next(i for i, m in enumerate(record["messages"]) if m["role"] == "user" and i > 1)
    record["messages"][i]["content"] = "X\nXXX/XXX/XXX"
    (problem,) = replay_problems(load_environment(**ENV), record)
    assert f"message {i} (user) is 'X\\nXXX/XXX/XXX' but the environment says" in problem


@pytest.mark.parametrize("reply", ["<move>42</move>", "I refuse to play"])
def test_a_reply_the_environment_refuses_is_named(records: list[dict], reply: str) -> None:
    record = first(records, "draw")
    i = [i for i, m in enumerate(record["messages"]) if m["role"] == "assistant"][1]
    record["messages"][i]["content"] = reply
    (problem,) = replay_problems(load_environment(**ENV), record)
    assert f"its answer to the reply at message {i}, {reply!r}" in problem


def test_a_last_reply_the_environment_refuses_is_named(records: list[dict]) -> None:
    record = first(records, "win")
    record["messages"][-1]["content"] = "<move>42</move>"
    (problem,) = replay_problems(load_environment(**ENV), record)
    assert "the record ends after" in problem and "'<move>42</move>'" in problem


def test_a_loss_relabelled_as_a_win_is_named(records: list[dict]) -> None:
    record = first(records, "loss")
    record["state"]["outcome"] = "win"
    record["values"].update(win=1.0, loss=0.0, outcome=1.0)
    record["reward"] = 1.0
    problems = replay_problems(load_environment(**ENV), record)
    assert "state 'outcome' is recorded as 'win', the environment says 'loss'" in problems
    assert any(p.startswith("rubric value 'win' is recorded as 1.0") for p in problems)
    assert any(p.startswith("reward is recorded as 1.0") for p in problems)


def test_records_that_are_not_games_are_named_not_raised(records: list[dict]) -> None:
    env = load_environment(**ENV)
    assert replay_problems(env, {"messages": []}) == ["the record has no 'spec' object to replay from"]
    bad = first(records, "draw")
    bad["messages"][2]["content"] = 7
    assert replay_problems(env, bad) == ["'messages' is not a list of {role, content} strings"]
    cut = first(records, "draw")
    del cut["messages"][-2:]
    assert replay_problems(env, cut)[0].startswith(f"the record ends after {len(cut['messages'])} messages")
