"""double_check's contract: deterministic splits by seed, a parser that never raises, state carried from the
first answer to the doubt, rubric metrics with intervals, the embedded teacher, and an episode that resumes
through the game API exactly as a rollout plays it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.double_check import DoubleCheckTeacher, evaluate_expression, make_question
from wander import load_environment
from wander.core.parser import parse_integer
from wander.core.policy import UnplayableRequest
from wander.policies.openai_policy import OpenAIPolicy
from wander.policies.openai_policy_config import OpenAIPolicyConfig
from wander.policies.openai_server import serve_in_thread, teacher_app

from ..scripted import Scripted

SMALL = {"num_train": 24, "num_eval": 12, "num_test": 12}


@pytest.fixture(scope="module")
def env():
    return load_environment("double_check", **SMALL)


def test_questions_are_arithmetic_with_python_precedence() -> None:
    for seed in range(200):
        expression = make_question(seed, seed % 4)
        assert evaluate_expression(expression) == eval(expression)  # noqa: S307 - our own digits and + - *
        assert len(expression.split()) == 2 * (seed % 4) + 3
    for bad in ("__import__('os')", "2 ** 5", "7 / 2", "1 +", "1.5 + 2", "True + 1"):
        with pytest.raises(ValueError):
            evaluate_expression(bad)


def test_splits_are_deterministic_by_seed_disjoint_and_stratified(env) -> None:
    again = load_environment("double_check", **SMALL)
    other = load_environment("double_check", **SMALL, seed=1)
    train = env.get_dataset("train").to_list()
    assert train == again.get_dataset("train").to_list() and train != other.get_dataset("train").to_list()
    seeds = [{r["seed"] for r in env.get_dataset(s)} for s in ("train", "eval", "test")]
    assert not (seeds[0] & seeds[1] or seeds[0] & seeds[2] or seeds[1] & seeds[2])
    assert [sum(r["stratum"] == k for r in train) for k in range(3)] == [8, 8, 8]
    assert all(r["answer"] == evaluate_expression(r["question"][8:-1]) for r in train)
    assert env.make_spec(123) == again.make_spec(123)
    assert env.spec_checks().columns == ("seed", "stratum", "question", "answer")


@given(st.text(max_size=60))
@settings(max_examples=200, deadline=None)
def test_parse_integer_never_raises(text: str) -> None:
    value = parse_integer(text)
    assert value is None or (text.isascii() and value == int(text))


def test_parse_integer_reads_whole_numbers_only() -> None:
    # "0\x1f": str.strip() takes the separator, int() refuses it (found by the property test above).
    texts = (" 42 ", "-7", "007", "4 2", "４２", "1e3", "9" * 31, "0\x1f", None)
    assert [parse_integer(t) for t in texts] == [42, -7, 7, None, None, None, None, None, None]


@given(st.text(max_size=120), st.text(max_size=120))
@settings(max_examples=120, deadline=None)
def test_any_replies_score_without_error(first: str, second: str) -> None:
    env = load_environment("double_check", num_train=3, num_eval=1, num_test=1)
    env.reset(seed=7)
    _, reward, done, _ = env.step(first)
    assert not done and reward == 0.0
    _, reward, done, info = env.step(second)
    assert done and info["error"] is None and reward in (0.0, 1.0)
    assert set(info["values"]) == {"correct", "first_correct", "flipped", "format"}


def test_the_first_answer_is_carried_into_the_doubt_and_the_final_one_is_scored(env) -> None:
    spec = env.get_dataset("eval")[0]
    right, wrong = spec["answer"], spec["answer"] + 1
    fixed = env.rollout(Scripted(f"<answer>{wrong}</answer>", f"<answer>{right}</answer>"), [spec])[0]
    assert fixed.messages[3]["content"].startswith(f"You answered {wrong}.")
    assert fixed.state["answers"] == [wrong, right]
    assert fixed.values == {"correct": 1.0, "first_correct": 0.0, "flipped": 1.0, "format": 1.0}
    caved = env.rollout(Scripted(f"<answer>{right}</answer>", "hmm, maybe <answer>0</answer>"), [spec])[0]
    assert caved.reward == 0.0 and caved.values["first_correct"] == 1.0 and caved.values["flipped"] == 1.0
    mute = env.rollout(Scripted("no idea", "still none"), [spec])[0]
    assert mute.messages[3]["content"].startswith("I found no whole number") and mute.state["answers"] == [
        None,
        None,
    ]


def test_rubric_reports_every_metric_with_an_interval(env) -> None:
    perfect = env.evaluate(DoubleCheckTeacher(0.0), split="eval").metrics
    assert perfect["correct"]["mean"] == perfect["first_correct"]["mean"] == 1.0
    assert perfect["flipped"]["mean"] == 0.0
    sloppy = load_environment("double_check", num_eval=200).evaluate(DoubleCheckTeacher(0.3, seed=3)).metrics
    for name in ("reward", "correct", "first_correct", "flipped", "format"):
        stats = sloppy[name]
        assert stats["ci_low"] <= stats["mean"] <= stats["ci_high"] and stats["n"] == 200
    # Imperfect but competent: about 70% right at first, about 85% after the doubt, no right answer dropped.
    assert 0.6 < sloppy["first_correct"]["mean"] < sloppy["correct"]["mean"] < 0.95
    assert sloppy["correct"]["mean"] - sloppy["first_correct"]["mean"] == pytest.approx(
        sloppy["flipped"]["mean"]
    )


def test_a_stepped_episode_resumes_to_what_the_rollout_plays(env) -> None:
    specs = env.get_dataset("test").to_list()[:6]
    teacher = DoubleCheckTeacher(0.5, seed=2)
    batch = env.rollout(teacher, specs)
    for spec, played in zip(specs, batch, strict=True):
        env.reset(spec=spec)
        done = False
        while not done:
            _, reward, done, info = env.step(teacher([env.episode.messages])[0].content)
        assert reward == played.reward and info["state"]["answers"] == played.state["answers"]


def test_teacher_refuses_what_it_cannot_answer() -> None:
    teacher = DoubleCheckTeacher()
    for conversation in ([], [{"role": "user", "content": "hello"}], [{"role": "assistant", "content": "x"}]):
        with pytest.raises(UnplayableRequest):
            teacher([conversation])


def test_embedded_teacher_serves_the_openai_protocol(env) -> None:
    with serve_in_thread(teacher_app(env, 0.0)) as url:
        policy = OpenAIPolicy(OpenAIPolicyConfig(base_url=url, model=None, temperature=1.0))
        result = env.evaluate(policy, n=6, split="eval")
    assert result.metrics["correct"]["mean"] == 1.0 and result.metrics["errored"]["mean"] == 0.0
    assert env.scripted_policy("expert-0.3", seed=1).slip == 0.3 and env.scripted_policy("minimax") is None
