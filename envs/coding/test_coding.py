"""The contract of coding, made by `wander env init coding`: what the pipeline relies on.

Splits fixed by their seed, replies that never crash scoring, a teacher that solves the task, the game API
playing as rollouts. Run it with `pytest envs/coding`; keep it passing as the task becomes yours.
"""

from __future__ import annotations

import pytest

from wander import load_environment
from wander.policies.openai_policy import OpenAIPolicy
from wander.policies.openai_policy_config import OpenAIPolicyConfig
from wander.policies.openai_server import serve_in_thread, teacher_app

NAME = "coding"
SMALL = {"num_train": 24, "num_eval": 16, "num_test": 16}
# Whatever a model writes, scoring must not fail: empty, prose, broken code, bad tool calls, code of another type.
REPLIES = [
    "",
    "no code at all",
    "```python\ndef f(:\n```",
    "```python\nraise SystemExit(3)\n```",
    '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>',
    '<tool_call>{"name": "run_tests", "arguments": {"code": 42}}</tool_call>',
    "<tool_call>{not json</tool_call>",
]


@pytest.fixture(scope="module")
def env():
    return load_environment(NAME, **SMALL)


def play(env, spec: dict, reply) -> tuple[float, dict]:
    """Play one episode through the game API, `reply(observation)` answering each turn; the reward and info."""
    env.reset(spec=spec)
    done = False
    while not done:
        _, reward, done, info = env.step(reply(env.observation(env.episode)))
    return reward, info


def test_splits_are_fixed_by_their_seed_disjoint_and_stratified(env) -> None:
    train = env.get_dataset("train").to_list()
    assert train == load_environment(NAME, **SMALL).get_dataset("train").to_list()
    assert train != load_environment(NAME, **SMALL, seed=1).get_dataset("train").to_list()
    seeds = [{row["seed"] for row in env.get_dataset(split)} for split in ("train", "eval", "test")]
    assert len(seeds[0] | seeds[1] | seeds[2]) == sum(SMALL.values())  # no seed in two splits, none repeated
    counts = [sum(row["stratum"] == k for row in train) for k in range(env.spec_checks().strata)]
    assert max(counts) - min(counts) <= 1  # every stratum equally often


@pytest.mark.parametrize("reply", REPLIES)
def test_any_reply_scores_without_error(env, reply: str) -> None:
    reward, info = play(env, env.get_dataset("eval")[0], lambda _: reply)
    assert info["error"] is None and 0.0 <= reward <= 1.0
    assert set(info["values"]) == set(env.rubric.names)


def test_the_teacher_solves_every_episode_and_its_slips_cost_reward(env) -> None:
    perfect = env.evaluate(env.teacher_policy(0.0, seed=0), split="eval").metrics
    assert perfect["reward"]["mean"] == 1.0
    sloppy = env.evaluate(env.teacher_policy(0.5, seed=1), split="eval").metrics["reward"]
    assert 0.0 < sloppy["mean"] < 1.0 and sloppy["ci_low"] <= sloppy["mean"] <= sloppy["ci_high"]


def test_a_stepped_episode_plays_as_the_rollout(env) -> None:
    specs = env.get_dataset("test").to_list()[:4]
    teacher = env.teacher_policy(0.5, seed=2)
    for spec, played in zip(specs, env.rollout(teacher, specs), strict=True):
        reward, _ = play(env, spec, lambda observation: teacher([observation])[0].content)
        assert reward == played.reward and env.episode.messages == played.messages


def test_what_the_pipeline_asks_of_the_env(env) -> None:
    checks = env.spec_checks()
    assert checks.columns[:2] == ("seed", "stratum") and checks.strata >= 1
    assert set(env.curation_defaults()["min_values"]) <= set(env.rubric.names)  # curate's floors are metrics
    suite = env.evaluation_suite()  # what the evaluate stage plays and reports
    assert suite.headline in {"reward", *env.rubric.names} and set(suite.groups) and set(suite.sides)
    assert 0.0 < env.teacher_skill < 1.0  # the embedded teacher is competent, not perfect
    assert all(env.scripted_policy(name) is not None for name in env.reference_policies)
    assert any(env.corpus())  # the scratch model's tokenizer learns from it


def test_the_embedded_teacher_answers_over_the_openai_protocol(env) -> None:
    with serve_in_thread(teacher_app(env, 0.0)) as url:
        policy = OpenAIPolicy(OpenAIPolicyConfig(base_url=url, model=None, temperature=1.0))
        result = env.evaluate(policy, n=4, split="eval")
    assert result.metrics["reward"]["mean"] == 1.0
