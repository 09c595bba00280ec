"""reverse_text's contract: deterministic splits by seed, a parser that never raises, rubric metrics with
intervals, the embedded teacher, and an episode that resumes through the game API exactly as a rollout plays it."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.reverse_text import ReverseTeacher, lcs_length
from wander import load_environment
from wander.policies.openai_policy import OpenAIPolicy
from wander.policies.openai_policy_config import OpenAIPolicyConfig
from wander.policies.openai_server import serve_in_thread, teacher_app

SMALL = {"num_train": 24, "num_eval": 12, "num_test": 12}


@pytest.fixture(scope="module")
def env():
    return load_environment("reverse_text", **SMALL)


def brute_lcs(a: str, b: str) -> int:
    """The longest common subsequence by trying every subsequence of `a` (tiny strings only)."""
    for size in range(len(a), 0, -1):
        for picked in itertools.combinations(a, size):
            it = iter(b)
            if all(ch in it for ch in picked):
                return size
    return 0


@given(st.text("abc ", max_size=7), st.text("abc ", max_size=7))
@settings(max_examples=60, deadline=None)
def test_lcs_matches_brute_force(a: str, b: str) -> None:
    assert lcs_length(a, b) == brute_lcs(a, b)


def test_splits_are_deterministic_by_seed_disjoint_and_stratified(env) -> None:
    again = load_environment("reverse_text", **SMALL)
    other = load_environment("reverse_text", **SMALL, seed=1)
    train = env.get_dataset("train").to_list()
    assert train == again.get_dataset("train").to_list() and train != other.get_dataset("train").to_list()
    seeds = [{r["seed"] for r in env.get_dataset(s)} for s in ("train", "eval", "test")]
    assert not (seeds[0] & seeds[1] or seeds[0] & seeds[2] or seeds[1] & seeds[2])
    assert [sum(r["stratum"] == k for r in train) for k in range(3)] == [8, 8, 8]
    lengths = [max(len(r["text"].split()) for r in train if r["stratum"] == k) for k in range(3)]
    assert lengths == sorted(lengths)  # higher strata are longer texts
    assert env.make_spec(123) == again.make_spec(123)


@given(st.text(max_size=200))
@settings(max_examples=150, deadline=None)
def test_any_reply_scores_without_error(reply: str) -> None:
    env = load_environment("reverse_text", num_train=3, num_eval=1, num_test=1)
    env.reset(seed=7)
    _, reward, done, info = env.step(reply)
    assert done and info["error"] is None and 0.0 <= reward <= 1.0
    assert set(info["values"]) == {"lcs_ratio", "exact", "format"}


def test_rubric_reports_every_metric_with_an_interval(env) -> None:
    perfect = env.evaluate(ReverseTeacher(0.0), split="eval").metrics
    assert perfect["exact"]["mean"] == perfect["lcs_ratio"]["mean"] == perfect["reward"]["mean"] == 1.0
    sloppy = env.evaluate(ReverseTeacher(0.6, seed=3), split="eval").metrics
    for name in ("reward", "lcs_ratio", "exact", "format"):
        stats = sloppy[name]
        assert stats["ci_low"] <= stats["mean"] <= stats["ci_high"] and stats["n"] == 12
    assert 0.5 < sloppy["lcs_ratio"]["mean"] < 1.0 and sloppy["exact"]["mean"] < 1.0  # imperfect, still good


def test_a_stepped_episode_resumes_to_what_the_rollout_plays(env) -> None:
    specs = env.get_dataset("test").to_list()[:4]
    teacher = ReverseTeacher(0.5, seed=2)
    batch = env.rollout(teacher, specs)
    for spec, played in zip(specs, batch, strict=True):
        prompt = env.reset(spec=spec)
        _, reward, done, _ = env.step(teacher([[{"role": "user", "content": prompt}]])[0].content)
        assert done and reward == played.reward


def test_embedded_teacher_serves_the_openai_protocol(env) -> None:
    with serve_in_thread(teacher_app(env, 0.0)) as url:
        policy = OpenAIPolicy(OpenAIPolicyConfig(base_url=url, model=None, temperature=1.0))
        result = env.evaluate(policy, n=6, split="eval")
    assert result.metrics["exact"]["mean"] == 1.0
    assert env.scripted_policy("expert-0.2", seed=1).slip == 0.2 and env.scripted_policy("minimax") is None
