"""calculator's contract: deterministic splits by seed, typed tools whose failures go back to the model, any
reply scored without error, rubric metrics with intervals, the embedded teacher over the OpenAI protocol, and an
episode that resumes through the game API exactly as a rollout plays it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.calculator import CalculatorTeacher, divide, make_problem, multiply, solution, subtract
from wander import load_environment
from wander.core.policy import UnplayableRequest
from wander.policies.openai_policy import OpenAIPolicy
from wander.policies.openai_policy_config import OpenAIPolicyConfig
from wander.policies.openai_server import serve_in_thread, teacher_app

from ..scripted import Scripted

SMALL = {"num_train": 24, "num_eval": 12, "num_test": 12}


@pytest.fixture(scope="module")
def env():
    return load_environment("calculator", **SMALL)


def test_problems_are_whole_number_chains_the_teacher_reads_back() -> None:
    for seed in range(300):
        problem, answer = make_problem(seed, seed % 4)
        value, steps = solution(problem)
        assert len(steps) == seed % 4 + 1
        for name, b in steps:
            value = {"add": int.__add__, "subtract": subtract, "multiply": multiply, "divide": divide}[name](
                value, b
            )
            assert isinstance(value, int) and value >= 0  # subtraction stays positive, division exact
        assert value == answer


def test_tools_are_typed_and_refuse_what_a_calculator_would() -> None:
    assert divide(7, 2) == 3.5 and divide(6, 3) == 2 and isinstance(divide(6, 3), int)
    assert subtract(2.5, 0.5) == 2 and multiply(-3, 4) == -12
    for call, error in (
        (lambda: divide(1, 0), ZeroDivisionError),
        (lambda: multiply("3", 2), TypeError),
        (lambda: subtract(True, 1), TypeError),
        (lambda: multiply(10**7, 10**7), OverflowError),
        (lambda: multiply(float("inf"), 1), OverflowError),
    ):
        with pytest.raises(error):
            call()


def test_splits_are_deterministic_by_seed_disjoint_and_stratified(env) -> None:
    again = load_environment("calculator", **SMALL)
    other = load_environment("calculator", **SMALL, seed=1)
    train = env.get_dataset("train").to_list()
    assert train == again.get_dataset("train").to_list() and train != other.get_dataset("train").to_list()
    seeds = [{r["seed"] for r in env.get_dataset(s)} for s in ("train", "eval", "test")]
    assert not (seeds[0] & seeds[1] or seeds[0] & seeds[2] or seeds[1] & seeds[2])
    assert [sum(r["stratum"] == k for r in train) for k in range(3)] == [8, 8, 8]
    assert all(len(solution(r["problem"])[1]) == r["stratum"] + 1 for r in train)
    assert env.make_spec(123) == again.make_spec(123)
    with pytest.raises(ValueError, match="max_turns"):
        load_environment("calculator", num_groups=4, max_turns=4)


@given(st.lists(st.text(max_size=80) | st.sampled_from(['<tool_call>{"name": "divide", "arguments": {"a": 1, "b": 0}}</tool_call>', '<tool_call>{"name": "add", "arguments": {"a": 1e308, "b": 1e308}}</tool_call>', '<tool_call>{"name": "pow", "arguments": {}}</tool_call>', "<tool_call>[1, 2]</tool_call>", '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>']), min_size=6, max_size=6))  # fmt: skip
@settings(max_examples=120, deadline=None)
def test_any_replies_score_without_error(replies: list[str]) -> None:
    env = load_environment("calculator", num_train=3, num_eval=1, num_test=1)
    env.reset(seed=7)
    done, turns = False, 0
    while not done:
        _, reward, done, info = env.step(replies[turns])
        turns += 1
    assert info["error"] is None and reward in (0.0, 1.0) and turns <= env.max_turns
    assert set(info["values"]) == {"correct", "format", "tool_calls", "tool_errors"}
    assert all(not m["content"].startswith("Traceback") for m in env.episode.messages)


def test_tool_results_and_errors_reach_the_model_and_the_final_answer_is_scored(env) -> None:
    spec = env.get_dataset("eval")[0]
    policy = Scripted(
        '<tool_call>{"name": "divide", "arguments": {"a": 1, "b": 0}}</tool_call>',
        '<tool_call>{"name": "add", "arguments": {"a": 40, "b": 2}}</tool_call>',
        f"<answer>{spec['answer']}</answer>",
    )
    [episode] = env.rollout(policy, [spec])
    assert [m["content"] for m in episode.messages if m["role"] == "tool"] == [
        "Error: ZeroDivisionError: division by zero",
        "42",
    ]
    assert episode.values == {"correct": 1.0, "format": 1.0, "tool_calls": 2.0, "tool_errors": 1.0}
    [unanswered] = env.rollout(Scripted(*[policy.replies[1]] * 6), [spec])
    assert unanswered.state["turn"] == env.max_turns and unanswered.reward == 0.0


def test_rubric_reports_every_metric_with_an_interval(env) -> None:
    perfect = env.evaluate(CalculatorTeacher(0.0), split="eval").metrics
    assert perfect["correct"]["mean"] == perfect["format"]["mean"] == 1.0
    assert perfect["tool_calls"]["mean"] == 2.0  # strata 0-2: one to three operations, as many calls
    sloppy = load_environment("calculator", num_eval=200).evaluate(CalculatorTeacher(0.2, seed=3)).metrics
    for name in ("reward", "correct", "format", "tool_calls", "tool_errors"):
        stats = sloppy[name]
        assert stats["ci_low"] <= stats["mean"] <= stats["ci_high"] and stats["n"] == 200
    assert 0.7 < sloppy["correct"]["mean"] < 0.9 and sloppy["tool_errors"]["mean"] == 0.0


def test_a_stepped_episode_resumes_to_what_the_rollout_plays(env) -> None:
    specs = env.get_dataset("test").to_list()[:6]
    teacher = CalculatorTeacher(0.5, seed=2)
    batch = env.rollout(teacher, specs)
    for spec, played in zip(specs, batch, strict=True):
        env.reset(spec=spec)
        done = False
        while not done:
            _, reward, done, _ = env.step(teacher([env.episode.messages])[0].content)
        assert reward == played.reward and env.episode.messages == played.messages


def test_teacher_refuses_what_it_cannot_answer(env) -> None:
    problem = env.get_dataset("eval")[0]["problem"]
    teacher = CalculatorTeacher()
    for conversation in (
        [],
        [{"role": "user", "content": "hello"}],
        [{"role": "user", "content": problem}, {"role": "assistant", "content": "x"}],
        [{"role": "user", "content": problem}, {"role": "tool", "content": "Error: oops"}],
    ):
        with pytest.raises(UnplayableRequest):
            teacher([conversation])
    first = json.loads(teacher([[{"role": "user", "content": problem}]])[0].content[11:-12])
    assert first["name"] in ("add", "subtract", "multiply", "divide") and set(first["arguments"]) == {
        "a",
        "b",
    }


def test_embedded_teacher_serves_the_openai_protocol(env) -> None:
    with serve_in_thread(teacher_app(env, 0.0)) as url:
        policy = OpenAIPolicy(OpenAIPolicyConfig(base_url=url, model=None, temperature=1.0))
        result = env.evaluate(policy, n=6, split="eval")
    assert result.metrics["correct"]["mean"] == 1.0 and result.metrics["tool_calls"]["mean"] > 1.0
    assert env.scripted_policy("expert-0.2", seed=1).slip == 0.2 and env.scripted_policy("minimax") is None
