"""An env whose steps block (`Environment.steps_block`: code in a sandbox, a remote judge) steps and scores a batch's
episodes at once, in rollouts and in curation's replays; any other env does them one after another, as before."""

from __future__ import annotations

import threading

import pytest

from wander.core.environment import Environment
from wander.core.policy import Reply
from wander.core.replay import replay_problems
from wander.core.rubric import Rubric

BATCH = 4


def reverser(conversations: list) -> list[Reply]:
    """Answers each conversation with its last message reversed."""
    return [Reply(conversation[-1]["content"][::-1]) for conversation in conversations]


class MeetingEnv(Environment):
    """One turn: the env's answer, then its rubric, wait until every episode of the batch is there too (or 5 s pass)."""

    def __init__(self, blocks: bool):
        super().__init__(rubric=Rubric([self.scored], [1.0]), max_turns=2)
        self.steps_block = blocks
        self.meeting = threading.Barrier(BATCH, timeout=5)
        self.scoring = threading.Barrier(BATCH, timeout=5)

    def scored(self, state: dict) -> float:
        self.scoring.wait()  # broken (an error in the episode) when the batch is not scored at once
        return float(state["met"])

    def initial_messages(self, spec, state):
        return [{"role": "user", "content": spec["word"]}]

    def env_response(self, messages, state):
        self.meeting.wait()  # broken (an error in the episode) when the batch's steps do not run at once
        state.update(met=True, done=True)
        return [{"role": "user", "content": f"met after {messages[-1]['content']}"}]


SPECS = [{"word": word} for word in ("ab", "cd", "ef", "gh")]


def test_a_blocking_envs_batch_steps_and_scores_at_once_each_episode_keeping_its_own_reply() -> None:
    episodes = MeetingEnv(blocks=True).rollout(reverser, SPECS)
    assert [ep.error for ep in episodes] == [None] * BATCH and [ep.reward for ep in episodes] == [1.0] * BATCH
    assert [ep.messages[-1]["content"] for ep in episodes] == [f"met after {s['word'][::-1]}" for s in SPECS]


def test_curation_replays_a_blocking_envs_records_at_once() -> None:
    env = MeetingEnv(blocks=True)
    records = [ep.to_dict() for ep in env.rollout(reverser, SPECS)]
    assert env.map_steps(lambda record: replay_problems(env, record), records) == [[]] * BATCH


@pytest.mark.parametrize("items", [[], ["only"]])
def test_map_steps_keeps_order_and_needs_no_threads_for_less_than_two(items: list[str]) -> None:
    assert MeetingEnv(blocks=True).map_steps(str.upper, items) == [item.upper() for item in items]


def test_other_envs_step_one_episode_after_another() -> None:
    env = MeetingEnv(blocks=False)
    env.meeting = threading.Barrier(BATCH, timeout=0.2)  # sequential steps never meet: each waits alone
    env.scoring = threading.Barrier(BATCH, timeout=0.2)
    episodes = env.rollout(reverser, SPECS)
    assert all(ep.error == "env_response: BrokenBarrierError: " for ep in episodes), [
        ep.error for ep in episodes
    ]
