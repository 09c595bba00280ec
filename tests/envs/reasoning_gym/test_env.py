"""reasoning-gym's tasks as a wander env, with reasoning-gym's own generators, scorers and curricula: the splits are
seeded and share no question, strata are curriculum levels, the reward is the task's own score, the teacher slips
at its rate and curation's floor removes the slips, a mix draws its tasks by weight, and a bad name is refused
before any work with the names there are."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from envs.reasoning_gym.tasks import levels, make_entry, parse_mix, score, task_names
from wander import load_environment

from ..scripted import Scripted

SIZES = {"num_train": 60, "num_eval": 16, "num_test": 16}
# Tasks of different kinds, each with a reference answer: strings, arithmetic, counting, sorting, a grid puzzle.
KINDS = ["spell_backward", "basic_arithmetic", "letter_counting", "number_sorting", "mini_sudoku"]


@pytest.fixture(scope="module")
def env():
    return load_environment("reasoning_gym", tasks="spell_backward", **SIZES)


def test_the_splits_are_seeded_and_no_question_is_in_two_splits_or_twice_in_one(env):
    questions = {s: [row["question"] for row in env.get_dataset(s)] for s in ("train", "eval", "test")}
    assert [len(q) for q in questions.values()] == [60, 16, 16]
    assert all(len(set(q)) == len(q) for q in questions.values())
    assert not set(questions["train"]) & (set(questions["eval"]) | set(questions["test"]))
    assert not set(questions["eval"]) & set(questions["test"])
    again = load_environment("reasoning_gym", tasks="spell_backward", **SIZES)
    assert [r["question"] for r in again.get_dataset("eval")] == questions["eval"]
    other = load_environment("reasoning_gym", tasks="spell_backward", seed=1, **SIZES)
    assert [r["question"] for r in other.get_dataset("eval")] != questions["eval"]


def test_strata_are_the_tasks_curriculum_levels_and_harder_levels_ask_more(env):
    rows = env.get_dataset("train")
    assert Counter(r["stratum"] for r in rows) == {k: 15 for k in range(4)}
    lengths = {
        k: [json.loads(r["task_metadata"])["word_len"] for r in rows if r["stratum"] == k] for k in range(4)
    }
    assert max(lengths[0]) <= 3 < max(lengths[3])  # level 0 asks 3-letter words, level 3 up to 9
    assert (
        levels("spell_backward") == 5 and levels("knight_swap") == 1
    )  # its curriculum's first level is invalid


@pytest.mark.parametrize("task", KINDS)
def test_the_reward_is_the_tasks_own_score_of_the_tagged_answer(task):
    env = load_environment("reasoning_gym", tasks=task, num_train=4, num_eval=8, num_test=4)
    spec = env.get_dataset("eval")[0]
    answer = json.loads(spec["answer"])
    [right] = env.rollout(Scripted(f"<answer>{answer}</answer>"), [spec])
    [wrong] = env.rollout(Scripted("<answer>certainly not it</answer>"), [spec])
    [untagged] = env.rollout(Scripted(str(answer)), [spec])
    assert right.values["correct"] == 1.0 and right.reward == pytest.approx(1.0)
    assert wrong.values["correct"] == 0.0 and wrong.reward == pytest.approx(0.1)  # the format alone
    assert untagged.values["correct"] == 0.0 and untagged.reward == 0.0
    entry = make_entry(task, spec["level"], spec["seed"])
    assert entry["question"] == spec["question"] and score(task, spec["level"], answer, entry) == 1.0


def test_the_teacher_answers_slips_at_its_rate_and_curations_floor_keeps_only_right_answers(env):
    expert = env.evaluate(env.scripted_policy("expert"), split="train").summary()
    slipping = env.rollout(env.teacher_policy(0.5, seed=0), list(env.get_dataset("train")))
    assert expert["correct"] == 1.0
    wrong = [e for e in slipping if e.values["correct"] < 1.0]
    assert 0.3 < len(wrong) / len(slipping) < 0.7  # about half slip
    floor = env.curation_defaults()["min_values"]
    assert floor == {"correct": 1.0} and all(any(e.values[k] < v for k, v in floor.items()) for e in wrong)


def test_a_mix_draws_its_tasks_by_weight_and_scores_each_with_its_own_scorer():
    mix = load_environment("reasoning_gym", tasks={"spell_backward": 3, "basic_arithmetic": 1}, **SIZES)
    drawn = Counter(r["task"] for r in mix.get_dataset("train"))
    assert (
        set(drawn) == {"spell_backward", "basic_arithmetic"}
        and drawn["spell_backward"] > drawn["basic_arithmetic"]
    )
    assert parse_mix("spell_backward:3,basic_arithmetic") == {"spell_backward": 3.0, "basic_arithmetic": 1.0}
    assert parse_mix(["gcd", "lcm"]) == {"gcd": 1.0, "lcm": 1.0}
    episodes = mix.evaluate(mix.scripted_policy("expert"), split="eval").summary()
    assert episodes["correct"] == 1.0


def test_an_unknown_task_or_a_bad_weight_is_refused_before_any_work_with_the_names_there_are():
    with pytest.raises(ValueError, match="no task named 'spel_backward'.*its tasks are: ab, acre,"):
        load_environment("reasoning_gym", tasks="spel_backward")
    with pytest.raises(ValueError, match="weights must be positive"):
        load_environment("reasoning_gym", tasks={"gcd": 0})
    with pytest.raises(ValueError, match="names no task"):
        load_environment("reasoning_gym", tasks="")


def test_the_answer_and_metadata_stay_private_and_the_budget_holds_the_longest_answer(env):
    spec = env.get_dataset("eval")[0]
    public = env.public_spec(spec)
    assert "answer" not in public and "task_metadata" not in public and public["question"] == spec["question"]
    longest = max(
        (json.loads(r["answer"]) for s in ("train", "eval", "test") for r in env.get_dataset(s)), key=len
    )
    assert env.reply_tokens() >= len(f"<answer>{longest}</answer>") // 4


def test_a_task_no_page_names_runs_the_same_way():
    # A task drawn from reasoning-gym's registry (seeded, so the run repeats), among those with a reference answer
    # whose generator builds offline in well under a second: the env needs no change for it.
    named = set(KINDS) | {"gcd", "lcm", "basic_arithmetic"}
    rng = random.Random(62)
    for task in rng.sample([t for t in task_names() if t not in named], 40):
        try:
            entry = make_entry(task, 0, 0)
        except Exception:  # a generator that needs what this machine lacks: try the next
            continue
        if entry["answer"] is not None:
            break
    env = load_environment("reasoning_gym", tasks=task, num_train=4, num_eval=4, num_test=4)
    summary = env.evaluate(env.scripted_policy("expert"), split="eval").summary()
    assert summary["correct"] == 1.0, task


def test_the_survey_says_which_tasks_the_embedded_teacher_plays_here():
    from envs.reasoning_gym.survey import survey_task

    assert survey_task("gcd", 20) | {"ms": 0} == {
        "task": "gcd",
        "levels": 4,
        "ms": 0,
        "reference": True,
        "teacher": True,
    }
    assert survey_task("boxnet", 20)["reference"] is False  # its scorer checks a plan: no answer to copy
    assert survey_task("composite", 20)["error"].startswith(
        "AssertionError: Must specify at least one dataset"
    )
    assert survey_task("power_function", 20)["teacher"]  # a config without a validate method
