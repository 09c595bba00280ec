"""`load_environment("openenv:URL")`: a served env evaluates exactly like the local one; any OpenEnv env wraps too."""

from __future__ import annotations

import copy
import time

import pytest
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment as OpenEnvEnvironment
from openenv.core.env_server.types import Action, Observation, State

from envs.tictactoe import MinimaxPlayer, RandomPlayer
from wander import load_environment
from wander.core.policy import Reply
from wander.core.replay import replay_problems
from wander.policies.openai_server import serve_in_thread
from wander.serve.client import RemoteEnvironment, RemoteError
from wander.serve.server import serve_env_in_thread

from .conftest import SETTINGS


def test_remote_evaluation_equals_local(served, local_env):
    remote = load_environment(f"openenv:{served}")
    assert isinstance(remote, RemoteEnvironment) and remote.wander
    assert remote.rubric.names == local_env.rubric.names and remote.full_history
    assert remote.get_dataset("eval").to_list() == local_env.get_dataset("eval").to_list()
    here, there = local_env(MinimaxPlayer(0.5, seed=3), n=16), remote(MinimaxPlayer(0.5, seed=3), n=16)
    for a, b in zip(here.trajectories, there.trajectories, strict=True):
        assert (a.messages, a.reward, a.values, a.error) == (b.messages, b.reward, b.values, b.error)
        assert replay_problems(local_env, b.to_dict()) == []  # a remote record passes curation's replay gate
    assert here.metrics == there.metrics


def test_200_episodes_at_once_through_the_wrapper(served, local_env):
    remote = load_environment(f"openenv:{served}")
    specs = [local_env.make_spec(5000 + i) for i in range(200)]
    there = remote.rollout(RandomPlayer(seed=9), specs)  # 200 sessions open together, one batch per turn
    here = local_env.rollout(RandomPlayer(seed=9), specs)
    assert [e.messages for e in there] == [e.messages for e in here]
    assert [e.reward for e in there] == [e.reward for e in here] and not any(e.error for e in there)


def test_the_game_api_and_a_lazily_forked_episode(served, local_env):
    remote = load_environment(f"openenv:{served}")
    assert remote.reset(seed=11) == local_env.reset(seed=11)
    ep = remote.start(local_env.make_spec(12))
    remote.advance(ep, Reply("<move>4</move>"))
    fork = copy.deepcopy(ep)  # a new session only when stepped, rebuilt by replaying the same reply
    for e in (ep, fork):
        remote.advance(e, Reply("<move>0</move>"))
    assert fork.messages == ep.messages and fork.state["board"] == ep.state["board"]
    remote.score([ep, fork])


# ----- an OpenEnv environment wander did not write: built with openenv's own base classes -----


class EchoAction(Action):
    message: str


class EchoObservation(Observation):
    echoed_message: str = ""


class EchoEnvironment(OpenEnvEnvironment[EchoAction, EchoObservation, State]):
    """Echoes each message; reward is the message length / 10; the episode ends after three steps."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State()

    def reset(self, seed=None, episode_id=None, **kwargs):
        self._state = State(episode_id=episode_id, step_count=0)
        return EchoObservation(echoed_message=f"say something ({seed})")

    def step(self, action, timeout_s=None, **kwargs):
        self._state.step_count += 1
        return EchoObservation(
            echoed_message=action.message,
            reward=len(action.message) / 10,
            done=self._state.step_count >= 3,
        )

    @property
    def state(self):
        return self._state


def test_an_openenv_echo_environment_is_wrapped_and_evaluated():
    app = create_fastapi_app(EchoEnvironment, EchoAction, EchoObservation, max_concurrent_envs=8)
    with serve_in_thread(app, api_path="", probe_path="/health") as url:
        env = load_environment(f"openenv:{url}", system_prompt="Echo game.")
        assert not env.wander and env.action_field == "message"

        def policy(conversations):
            return [Reply("x" * len(c)) for c in conversations]  # longer conversation, longer reply

        result = env(policy, n=4)
        first = result.trajectories[0]
        assert first.messages[0] == {"role": "system", "content": "Echo game."}
        assert first.messages[1]["content"] == f"say something ({first.seed})"
        assert [m["content"] for m in first.messages[2:]] == ["xx", "xx", "xxxx", "xxxx", "xxxxxx", "xxxxxx"]
        assert first.reward == pytest.approx((2 + 4 + 6) / 10) and first.done and first.error is None
        assert (
            result.metrics["reward"]["mean"] == pytest.approx(1.2)
            and result.metrics["errored"]["mean"] == 0.0
        )


def test_sessions_are_given_back_scored_or_dropped(local_env):
    env = load_environment("tictactoe", **SETTINGS)
    # One client (this process) fills the cap: it may hold every session.
    with serve_env_in_thread(env, max_sessions=8, max_sessions_per_client=8) as url:
        remote = load_environment(f"openenv:{url}")
        for _ in range(3):  # scored episodes close their sessions
            assert remote(RandomPlayer(seed=1), n=8).metrics["errored"]["mean"] == 0.0
        for i in range(
            16
        ):  # episodes started and dropped (a trainer's dataset prompts) close theirs when freed
            assert remote.start(local_env.make_spec(i)).prompt
        deadline = time.monotonic() + 10
        while True:  # the finalizer's close is asynchronous
            result = remote(RandomPlayer(seed=2), n=8)
            if result.metrics["errored"]["mean"] == 0.0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert result.metrics["errored"]["mean"] == 0.0


def test_no_server_is_one_clear_error():
    with pytest.raises(RemoteError, match="no OpenEnv server at http://127.0.0.1:9"):
        load_environment("openenv:http://127.0.0.1:9")


def test_a_private_answer_stays_on_the_server_which_still_scores_with_it():
    """The calculator's specs hold their answer: the Task API lists them without it, and the client resets an
    episode by split and index, so the server plays it with the answer and the rewards are the local ones."""
    local = load_environment("calculator", num_train=4, num_eval=6, num_test=4)
    with serve_env_in_thread(load_environment("calculator", num_train=4, num_eval=6, num_test=4)) as base:
        remote = load_environment(f"openenv:{base}")
        listed = remote.get_dataset("eval").to_list()
        assert listed == [local.public_spec(spec) for spec in local.get_dataset("eval")]
        assert all("answer" not in spec for spec in listed)
        teacher = local.teacher_policy(0.0, 0)
        here, there = local(teacher, n=6).trajectories, remote(teacher, n=6).trajectories
        assert [ep.reward for ep in there] == [ep.reward for ep in here] == [1.0] * 6
        assert [ep.messages for ep in there] == [ep.messages for ep in here]
