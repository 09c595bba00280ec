"""The special-casing attack on the coding reward: a model that never solves the problem but reads the failing
tests' expected values back from `run_tests` and submits a function that returns them for those inputs. With the
tests the model is shown also the ones it is scored on (before issue 64), this scored 1 on every problem in a few
turns; scored on hidden tests, it passes every example it was shown and earns 0."""

from __future__ import annotations

import ast
import re

import pytest

from envs.coding.problems import call_text, make_problem
from envs.coding.teacher import RUN_TESTS, tool_call
from wander import Reply, load_environment

SETTINGS = {"num_train": 8, "num_eval": 8, "num_test": 8, "heldout": "test"}
QUOTED = re.compile(r"^(?P<call>\w+\(.*\)) returned .*, expected (?P<expected>.*)$")


class SpecialCaser:
    """Submits a lookup table of every call and expected value quoted back so far, and None for anything else."""

    def __call__(self, conversations):
        return [Reply(tool_call(RUN_TESTS, self.code(c))) for c in conversations]

    @staticmethod
    def code(conversation) -> str:
        entry = re.search(r"`(\w+)\(", next(m["content"] for m in conversation if m["role"] == "user"))[1]
        seen = {}
        for message in conversation:
            if message["role"] == "tool":
                for line in message["content"].splitlines():
                    quoted = QUOTED.match(line)
                    if quoted:
                        seen[quoted["call"]] = ast.literal_eval(quoted["expected"])
        return (
            f"SEEN = {seen!r}\n\n\n"
            f"def {entry}(*args):\n"
            f"    return SEEN.get('{entry}(' + ', '.join(repr(a) for a in args) + ')')\n"
        )


@pytest.fixture(scope="module")
def env():
    return load_environment("coding", **SETTINGS)


def test_code_fitted_to_the_quoted_tests_passes_every_example_and_scores_0(env):
    specs = env.get_dataset("eval").to_list()
    episodes = env.rollout(SpecialCaser(), specs)
    for spec, episode in zip(specs, episodes, strict=True):
        problem = make_problem(spec["seed"], spec["stratum"])
        assert episode.error is None, episode.error
        # It learned every example (the episode ends on that) and none of the hidden tests.
        assert episode.values["examples_passed"] == 1.0 and episode.done, spec["problem"]
        assert episode.messages[-1]["content"] == f"All {len(problem.examples)} example tests passed."
        assert episode.values["tests_passed"] == 0.0 and episode.reward == 0.0, spec["problem"]
        shown = "\n".join(m["content"] for m in episode.messages if m["role"] == "tool")
        assert not any(call_text(problem.entry_point, list(args)) in shown for args, _ in problem.tests)


def test_the_reference_scores_1_where_the_attack_scores_0(env):
    # The same episodes with the problem solved: the hidden tests are passable, so the 0 above is the attack's.
    specs = env.get_dataset("eval").to_list()
    solved = env.rollout(env.teacher_policy(0.0, seed=0), specs)
    assert [episode.reward for episode in solved] == [1.0] * len(specs)
