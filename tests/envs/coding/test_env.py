"""The coding env's episodes: when they end, what each tool answers, what the rubric reads, the reply budget."""

from __future__ import annotations

import json

import pytest

from envs.coding import longest_code
from envs.coding.problems import MAX_STRATA, make_problem
from envs.coding.teacher import final_reply, tool_call
from wander import load_environment
from wander.core.pipeline_hooks import text_tokens

from ..scripted import Scripted

SETTINGS = {"num_train": 8, "num_eval": 8, "num_test": 8, "heldout": "test"}


@pytest.fixture(scope="module")
def env():
    return load_environment("coding", **SETTINGS)


@pytest.fixture(scope="module")
def spec(env) -> dict:
    return env.get_dataset("eval")[0]


@pytest.fixture(scope="module")
def problem(spec):
    return make_problem(spec["seed"], spec["stratum"])


def play(env, spec: dict, *replies: str):
    [episode] = env.rollout(Scripted(*replies), [spec])
    return episode


def test_passing_examples_end_the_episode_at_once_and_the_hidden_tests_give_the_reward(env, spec, problem):
    episode = play(env, spec, tool_call("run_tests", problem.reference), "never read")
    assert (
        episode.state["turn"] == 1
        and episode.messages[-1]["content"] == f"All {len(problem.examples)} example tests passed."
    )
    assert episode.reward == 1.0 and episode.values["first_passed"] == episode.values["submissions"] == 1.0
    assert episode.values["tests_passed"] == episode.values["examples_passed"] == 1.0


def test_a_fix_after_the_failures_counts_and_the_first_try_is_remembered(env, spec, problem):
    episode = play(
        env, spec, tool_call("run_tests", problem.buggy), tool_call("run_tests", problem.reference)
    )
    failures = episode.messages[3]["content"]
    assert failures.startswith("Passed ") and " example tests." in failures.split("\n")[0]
    assert f"{problem.entry_point}(" in failures and "expected" in failures
    # Only examples are quoted: no hidden test's call appears in what the model reads.
    from envs.coding.problems import call_text

    assert not any(call_text(problem.entry_point, list(args)) in failures for args, _ in problem.tests)
    assert episode.values["all_passed"] == 1.0 and episode.values["first_passed"] == 0.0
    assert episode.values["submissions"] == 2.0 and episode.reward == 1.0


def test_the_final_reply_s_code_block_is_the_submission_and_prose_scores_0(env, spec, problem):
    solved = play(env, spec, final_reply(problem.reference))
    assert solved.reward == 1.0 and solved.values["format"] == 1.0 and len(solved.messages) == 3
    prose = play(env, spec, "Here is my answer: it adds the numbers.")
    assert prose.reward == 0.0 and prose.values["submissions"] == 0.0 and prose.values["format"] == 0.0


def test_the_last_submission_counts_all_or_nothing_and_partial_credit_is_a_metric(env):
    problems = [(s, make_problem(s["seed"], s["stratum"])) for s in env.get_dataset("eval")]
    played = [(s, p, play(env, s, final_reply(p.buggy))) for s, p in problems]
    # Some slips fail every test (a crash), others some of them: the first of those.
    spec, problem, half = next((s, p, e) for s, p, e in played if e.values["tests_passed"] > 0)
    assert half.values["all_passed"] == 0.0 and 0.0 < half.values["tests_passed"] < 1.0
    assert (
        half.reward == 0.0 and half.values["style"] == 1.0
    )  # clean code that fails a hidden test earns nothing
    worse = play(
        env, spec, tool_call("run_tests", problem.buggy), final_reply("def unrelated():\n    pass\n")
    )
    assert worse.values["submissions"] == 2.0 and worse.values["tests_passed"] == worse.reward == 0.0


def test_style_reads_ruff_findings_of_passing_code(env, spec, problem):
    messy = "import os\nimport sys\n" + problem.reference  # two unused imports (F401)
    episode = play(env, spec, tool_call("run_tests", messy))
    assert episode.values["all_passed"] == 1.0 and episode.values["lint"] == 2.0
    assert episode.values["style"] == 0.5 and episode.reward == 1.0  # style is reported, not rewarded


def test_run_code_shows_status_and_output_and_tool_errors_are_counted(env, spec):
    episode = play(
        env,
        spec,
        tool_call("run_code", "print(6 * 7)\nraise SystemExit(3)"),
        '<tool_call>{"name": "run_tests", "arguments": {"code": 42}}</tool_call>',
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',
        "done",
    )
    shown = [m["content"] for m in episode.messages if m["role"] == "tool"]
    assert shown[0] == "exit status 3\nstdout:\n42"
    assert shown[1].startswith("Error: TypeError: code must be a string") and shown[2].startswith(
        "Error: KeyError"
    )
    assert episode.values["tool_errors"] == 2.0 and episode.values["format"] == pytest.approx(1 / 4)
    assert episode.reward == 0.0 and episode.values["exec_seconds"] > 0.0


def test_the_turn_limit_ends_an_episode_that_keeps_failing(env, spec, problem):
    episode = play(env, spec, *[tool_call("run_tests", problem.buggy)] * env.max_turns)
    assert (
        episode.done and episode.state["turn"] == env.max_turns == 5 and episode.values["submissions"] == 5.0
    )


def test_hidden_tests_stay_private_and_a_replay_ignores_the_seconds(env, spec, problem):
    for key in ("tests", "examples"):
        assert key not in env.public_spec(spec) and key not in env.public_state(env.start(spec).state)
    from wander.core.replay import replay_problems

    record = play(
        env, spec, tool_call("run_tests", problem.buggy), tool_call("run_tests", problem.reference)
    ).to_dict()
    record["state"]["exec_seconds"] = record["values"]["exec_seconds"] = 123.0  # another machine's seconds
    assert replay_problems(env, record) == []
    record["values"]["all_passed"] = 0.0
    assert replay_problems(env, record) == [
        "rubric value 'all_passed' is recorded as 0.0, the environment says 1.0"
    ]


def test_the_reply_budget_covers_every_teacher_reply_beyond_the_sampled_seeds(env):
    longest = max(
        (
            code
            for seed in range(2000)
            for k in range(MAX_STRATA)
            for p in [make_problem(seed, k)]
            for code in (p.reference, p.buggy)
        ),
        key=len,
    )
    assert longest_code(MAX_STRATA) == longest  # the sampled seeds hold the longest already
    assert (
        env.reply_tokens()
        >= text_tokens(tool_call("run_tests", longest))
        >= text_tokens(final_reply(longest))
    )
    assert env.completion_tokens() > env.max_turns * env.reply_tokens()
    json.dumps(env.get_dataset("train").to_list())  # specs are plain JSON (the generate stage writes them)


def test_no_eval_or_test_problem_is_one_the_train_split_holds():
    env = load_environment("coding", num_train=400, num_eval=40, num_test=40)
    train = {row["problem"] for row in env.get_dataset("train")}
    for split in ("eval", "test"):
        rows = env.get_dataset(split).to_list()
        assert not any(row["problem"] in train for row in rows), split
        assert [sum(row["stratum"] == k for row in rows) for k in range(MAX_STRATA)] == [10] * MAX_STRATA
    assert (
        env.get_dataset("eval").to_list()
        == load_environment("coding", num_train=400, num_eval=40, num_test=40).get_dataset("eval").to_list()
    )
    with pytest.raises(ValueError, match="found .* of 10 distinct problems on its side of the held-out line"):
        from envs.coding.prompt_splits import disjoint_split_specs

        class Impossible:  # every problem text is held out, so no train spec exists
            seed, num_groups, sizes = 0, 1, {"train": 10}

            def make_spec(self, seed, stratum=None):
                return {"problem": "x"}  # a text whose hash puts it on the held-out side

        from envs.coding.prompt_splits import held_out

        assert held_out("x")
        disjoint_split_specs(Impossible(), "train")
