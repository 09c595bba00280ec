"""`load_environment("openenv:URL", local=env)`: env's episodes stepped on a server, records equal to local ones."""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI

from envs.tictactoe import RandomPlayer
from wander import load_environment
from wander.core.capabilities import BestOutcomes, CandidateReplies, ExpectedOutcomes
from wander.core.policy import Reply
from wander.policies.openai_server import serve_in_thread
from wander.serve.client import RemoteError
from wander.serve.served import ServedEnvironment, SettingsMismatch
from wander.serve.server import serve_env_in_thread
from wander.training.curriculum import Curriculum
from wander.training.curriculum_config import CurriculumStage

# Specs (opponent range, strata, split sizes) and reward weights differ from the server's defaults: they are the
# client's side, so the served episodes must still equal these local ones.
LOCAL = dict(random_move_prob=(0.0, 0.5), num_groups=2, num_train=24, invalid_penalty=-0.5)


@pytest.fixture(scope="module")
def url():
    """A tic-tac-toe server with the default settings."""
    with serve_env_in_thread(load_environment("tictactoe")) as base:
        yield base


def records(episodes) -> list[str]:
    return [json.dumps(ep.to_dict()) for ep in episodes]


def test_records_are_the_local_ones_byte_for_byte(url):
    local = load_environment("tictactoe", **LOCAL)
    served = load_environment(f"openenv:{url}", local=local)
    assert isinstance(served, ServedEnvironment) and served.name == "tictactoe"
    assert served.get_dataset("train").to_list() == local.get_dataset("train").to_list()
    assert served.config is local.config  # attributes it lacks are the local env's
    specs = local.get_dataset("train").to_list()
    for make in (lambda: RandomPlayer(seed=4), lambda: centre):  # a fresh player each: it keeps a generator
        here, there = local.rollout(make(), specs), served.rollout(make(), specs)
        assert records(there) == records(here)
    assert all(ep.state["invalid"] for ep in here)  # the local invalid-move penalty is in those rewards


def centre(conversations: list) -> list[Reply]:
    """A policy that always takes the centre: invalid once it is taken."""
    return [Reply("<move>4</move>") for _ in conversations]


def test_expected_outcomes_and_candidate_moves_of_a_served_episode_are_the_local_ones(url):
    local = load_environment("tictactoe", **LOCAL)
    served = load_environment(f"openenv:{url}", local=local)
    spec = local.get_dataset("train")[0]
    here, there = local.start(spec), served.start(spec)
    for _ in range(2):  # two moves in, so the branch state is the one the server reported
        local.advance(here, Reply("<move>4</move>") if not here.replies else Reply("<move>0</move>"))
        served.advance(there, Reply("<move>4</move>") if not there.replies else Reply("<move>0</move>"))
    # The local env's capabilities are the served env's, and only those (wander/core/capabilities.py).
    for capability in (CandidateReplies, ExpectedOutcomes, BestOutcomes):
        assert isinstance(served, capability)
    assert served.candidate_replies(there) == local.candidate_replies(here) != []
    moves = [Reply(m) for m in local.candidate_replies(here)]
    expected_here = local.expected_outcomes([(here, m) for m in moves], centre)
    assert served.expected_outcomes([(there, m) for m in moves], centre) == expected_here
    assert len({round(o["reward"], 9) for o in expected_here}) > 1  # the moves are worth different amounts
    served.score([there])  # closes the session


def test_a_curriculum_stage_gets_the_same_server_with_its_settings_here(url):
    served = load_environment(f"openenv:{url}", local=load_environment("tictactoe", num_train=8))
    stage = CurriculumStage("strong", random_move_prob=(0.0, 0.25), env_kwargs={"invalid_penalty": -1.0})
    staged = Curriculum([stage]).stage_env(served, 0)
    assert isinstance(staged, ServedEnvironment) and staged.url == served.url
    assert staged.config.invalid_penalty == -1.0
    assert all(s["random_move_prob"] <= 0.25 for s in staged.get_dataset("train"))
    with pytest.raises(SettingsMismatch, match="setting rendering is 'board' there, 'grid' here"):
        Curriculum([CurriculumStage("grid", env_kwargs={"rendering": "grid"})]).stage_env(served, 0)


def test_another_game_or_a_server_that_is_not_wander_is_refused(url):
    with pytest.raises(SettingsMismatch, match="max_turns is 8 there, 6 here"):
        load_environment(f"openenv:{url}", local=load_environment("tictactoe", max_turns=6))
    with serve_in_thread(FastAPI(), api_path="", probe_path="/docs") as other:
        with pytest.raises(SettingsMismatch, match="not a wander one"):
            load_environment(f"openenv:{other}", local=load_environment("tictactoe"))


def test_an_episode_ended_here_first_is_scored_here_and_a_lost_server_raises():
    local = load_environment("tictactoe", num_train=8)
    with serve_env_in_thread(load_environment("tictactoe")) as base:
        served = load_environment(f"openenv:{base}", local=local)
        spec = local.get_dataset("train")[0]
        cut, mine = served.start(spec), local.start(spec)
        for ep, env in ((cut, served), (mine, local)):
            env.advance(ep, Reply("<move>4</move>"))
            ep.done = True  # a trainer's token budget ran out
            env.score([ep])
        assert records([cut]) == records([mine])
        live = served.start(spec)
    with pytest.raises(RemoteError, match="a step on the tictactoe server failed"):
        served.advance(live, Reply("<move>4</move>"))


def test_private_state_stays_on_the_server_and_is_rebuilt_here_for_records_and_a_cut_episodes_score():
    """workplace_assistant keeps its workspace private: the server never sends it, and the served env replays the
    episode here to have it, so records equal local ones and an episode cut here is scored on the whole state."""
    settings = dict(num_train=4, num_eval=3, num_test=3)
    local = load_environment("workplace_assistant", **settings)
    assert local.private_state_keys == {"workspace"}
    with serve_env_in_thread(load_environment("workplace_assistant", **settings)) as base:
        served = load_environment(f"openenv:{base}", local=local)
        specs = local.get_dataset("eval").to_list()
        teacher = local.teacher_policy(0.0, 0)
        live = served.start(specs[0])
        assert "workspace" not in live.state  # what the server sent: no workspace
        here, there = local.rollout(teacher, specs), served.rollout(teacher, specs)
        assert records(there) == records(here)
        assert [ep.state["workspace"] for ep in there] == [ep.state["workspace"] for ep in here]
        assert all(ep.reward == 1.0 for ep in there)  # the teacher at skill 0 completes every request
        cut, mine = served.start(specs[1]), local.start(specs[1])
        for ep, env in ((cut, served), (mine, local)):
            env.advance(ep, teacher([env.observation(ep)])[0])
            ep.done = True  # a trainer's token budget ran out: scored here, on the rebuilt workspace
            env.score([ep])
        assert records([cut]) == records([mine]) and cut.values == mine.values and "workspace" in cut.state
        served.score([live])
