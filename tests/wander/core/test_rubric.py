"""Rubric: weights, metrics, declared arguments, async functions, errors isolated per episode."""

import asyncio

import pytest

from wander import Rubric, XMLParser


def episodes():
    return [
        {
            "prompt": [{"role": "user", "content": "q"}],
            "completion": [{"role": "assistant", "content": "<move>1</move>"}],
            "state": {"n": 1},
            "answer": "1",
            "info": {"id": 0},
        },
        {
            "prompt": [{"role": "user", "content": "q"}],
            "completion": [{"role": "assistant", "content": "<move>2</move>"}],
            "state": {"n": 2},
            "answer": "1",
            "info": {"id": 1},
        },
    ]


def correct(completion, answer, parser):
    return float(parser.parse_answer(completion) == answer)


async def slow_len(completion):
    await asyncio.sleep(0.01)
    return len(completion[-1]["content"])


def test_weighted_sum_with_metrics_reported_separately():
    rubric = Rubric([correct, slow_len], [2.0, 0.0], parser=XMLParser(("move",), "move"))
    scores = rubric.score(episodes())
    assert [s.reward for s in scores] == [2.0, 0.0]
    assert scores[0].values == {"correct": 1.0, "slow_len": 14.0}
    assert all(s.error is None for s in scores)


def test_functions_receive_only_what_they_declare():
    seen = {}

    def by_kwargs(**kwargs):
        seen.update(kwargs)
        return 1.0

    def only_state(state):
        return state["n"]

    rubric = Rubric([by_kwargs, only_state], [1.0, 1.0])
    assert [s.reward for s in rubric.score(episodes())] == [2.0, 3.0]
    assert set(seen) == {"prompt", "completion", "state", "answer", "info", "parser"}


def test_a_raising_function_marks_its_episode_errored_not_the_batch():
    def fragile(state):
        if state["n"] == 2:
            raise ZeroDivisionError("boom")
        return 1.0

    async def fragile_async(state):
        if state["n"] == 1:
            raise KeyError("missing")
        return 1.0

    s1, s2 = Rubric([fragile, fragile_async], [1.0, 1.0]).score(episodes())
    assert s1.error == "fragile_async: KeyError: 'missing'" and s1.reward == 0.0
    assert s2.error == "fragile: ZeroDivisionError: boom" and s2.reward == 0.0
    assert s1.values == {"fragile": 1.0} and s2.values == {"fragile_async": 1.0}


def test_bad_construction_is_refused():
    with pytest.raises(ValueError, match="weights"):
        Rubric([correct], [])
    rubric = Rubric([correct], [1.0])
    with pytest.raises(ValueError, match="already has"):
        rubric.add(correct)


def test_scoring_works_inside_a_running_event_loop():
    async def main():
        return Rubric([slow_len], [1.0]).score(episodes())

    assert [s.reward for s in asyncio.run(main())] == [14.0, 14.0]
