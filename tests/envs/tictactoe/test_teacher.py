"""The embedded teacher server plays whole games through the official openai client."""

import openai
import pytest

from envs.tictactoe import ExpertPlayer
from wander import load_environment
from wander.policies.openai_policy import OpenAIPolicy
from wander.policies.openai_policy_config import OpenAIPolicyConfig
from wander.policies.openai_server import serve_in_thread, teacher_app


@pytest.fixture(scope="module")
def teacher_url():
    with serve_in_thread(teacher_app(load_environment("tictactoe"))) as url:
        yield url


@pytest.mark.parametrize("reply_format", ["think", "move"])
def test_openai_client_plays_a_whole_game_against_the_teacher(teacher_url, reply_format):
    env = load_environment(
        "tictactoe", rendering="grid", reply_format=reply_format, random_move_prob=(0.0, 0.0)
    )
    client = openai.OpenAI(base_url=teacher_url, api_key="EMPTY", max_retries=0)
    assert [m.id for m in client.models.list().data] == ["tictactoe-teacher"]
    env.reset(seed=3)
    done, turns = False, 0
    while not done:
        reply = client.chat.completions.create(
            model="tictactoe-teacher", messages=env.episode.messages, seed=turns
        )
        content = reply.choices[0].message.content
        assert "<move>" in content and ("<think>" in content) == (
            reply_format == "think"
        )  # as the prompt asks
        assert reply.usage.completion_tokens > 0
        _, reward, done, info = env.step(content)
        turns += 1
    assert info["state"]["outcome"] in ("draw", "loss") and info["state"]["invalid"] == 0
    assert info["values"]["format"] == 1.0


def test_teacher_policy_over_http_matches_the_calibration(teacher_url):
    policy = OpenAIPolicy(
        OpenAIPolicyConfig(base_url=teacher_url, model="tictactoe-teacher", max_concurrency=16)
    )
    env = load_environment("tictactoe", random_move_prob=(0.0, 0.0), num_eval=120)
    result = env.evaluate(policy)
    assert result.metrics["errored"]["mean"] == 0.0
    assert result.metrics["invalid_moves"]["mean"] == 0.0
    assert result.metrics["win"]["mean"] == 0.0  # nobody beats perfect minimax
    assert 0.1 < result.metrics["loss"]["mean"] < 0.45  # an imperfect teacher: it loses some games


def test_expert_skill_is_calibrated_like_the_published_teacher():
    """Loses about a quarter of its games to minimax p=0 and wins most games against random."""
    vs_minimax = load_environment("tictactoe", random_move_prob=(0.0, 0.0), num_eval=2000)
    vs_random = load_environment("tictactoe", random_move_prob=(1.0, 1.0), num_eval=2000)
    m = vs_minimax.evaluate(ExpertPlayer(0.5, seed=0)).metrics
    r = vs_random.evaluate(ExpertPlayer(0.5, seed=0)).metrics
    assert 0.2 < m["loss"]["mean"] < 0.32 and m["win"]["mean"] == 0.0
    assert r["win"]["mean"] > 0.8 and r["loss"]["mean"] < 0.05


def test_bad_teacher_skill_is_refused():
    with pytest.raises(ValueError, match="teacher skill"):
        teacher_app(load_environment("tictactoe"), 1.5)
