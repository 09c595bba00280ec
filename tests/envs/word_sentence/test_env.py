"""word_sentence scored by its stand-in judge: the teacher's full sentences get full marks, a slip loses its
share of the words, two sentences or none get 0, in either verdict (a grade, or Yes/No)."""

from __future__ import annotations

import pytest

from envs.word_sentence import ASK, words_grade
from wander import load_environment

SMALL = {"num_train": 8, "num_eval": 16, "num_test": 8}


@pytest.mark.parametrize(
    ("reply", "grade"),
    [
        ("<sentence>The river, the lamp and the violin met.</sentence>", 10),
        ("<sentence>The river and the lamp met.</sentence>", 7),  # 2 of 3 words
        ("<sentence>The river met. The lamp and the violin too.</sentence>", 0),  # two sentences
        ("The river, the lamp and the violin met.", 0),  # no tag
    ],
)
def test_the_stand_in_grades_the_share_of_words_in_one_sentence(reply: str, grade: int) -> None:
    assert words_grade(ASK + "river, lamp, violin", reply) == grade


@pytest.mark.parametrize("verdict", ["score", "yes_no"])
def test_the_teachers_slips_are_what_the_judge_marks_down(verdict: str) -> None:
    env = load_environment("word_sentence", judge_verdict=verdict, **SMALL)
    specs = env.get_dataset("eval").to_list()
    assert sorted({len(s["words"].split(", ")) for s in specs}) == [2, 3, 4, 5]  # stratum k: k + 2 words
    full = env.rollout(env.teacher_policy(0.0, 0), specs)
    assert [e.reward for e in full] == [1.0] * len(specs)
    slipping = env.rollout(env.teacher_policy(0.5, 0), specs)
    rewards = [e.reward for e in slipping]
    assert 0 < rewards.count(1.0) < len(specs)
    marked_down = {r for r in rewards if r < 1.0}
    if verdict == "yes_no":
        assert marked_down == {0.0}  # a slip is a No
    else:
        assert marked_down and all(0 < r < 1 for r in marked_down)  # a slip keeps its share of the words
