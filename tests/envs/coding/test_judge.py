"""The coding env's tests are judged outside the model's process: a forged verdict, a search of its own process
for the expected values, a patched builtin, an `__eq__` that says yes, answers written on the harness's behalf,
an early exit and an exception can only lose points; a neighbour's fork bomb cannot fail a correct program; the
values between the judge and the sandbox are plain data (`envs/coding/wire.py`). Real bubblewrap, real limits."""

from __future__ import annotations

import json
import secrets
import threading
import time

import pytest

from envs.coding import wire
from envs.coding.execution import run_tests
from envs.coding.problems import make_problem
from envs.coding.teacher import tool_call
from wander import load_environment

from ...sandbox_host import nothing_left_running  # noqa: F401
from ..scripted import Scripted

SETTINGS = {"num_train": 8, "num_eval": 8, "num_test": 8, "timeout_s": 5.0, "cpu_s": 2, "memory_mb": 128}


@pytest.fixture(scope="module")
def env():
    return load_environment("coding", **SETTINGS)


@pytest.fixture(scope="module")
def spec(env) -> dict:
    return env.get_dataset("eval")[0]


def judged(env, spec: dict, code: str):
    """`code` judged on the spec's example and hidden tests."""
    return run_tests(
        env.sandbox, code, spec["entry_point"], json.loads(spec["tests"]), json.loads(spec["examples"])
    )


def test_the_verdict_forged_through_the_harness_scores_0_through_the_env_tool(env, spec):
    # The attack found at 7ffe194: the harness was the model's own __main__; calling its verdict passed every test.
    forged = (
        "import __main__ as h, os\n"
        "h.verdict({'results': [{'ok': True, 'got': 'x'} for _ in h.cases]})\n"
        "os._exit(0)\n"
    )
    [episode] = env.rollout(Scripted(tool_call("run_tests", forged), "I give up."), [spec])
    answer = next(m["content"] for m in episode.messages if m["role"] == "tool")
    assert "passed" not in answer.split("\n")[0].replace("Passed 0", ""), answer
    assert (
        episode.values["all_passed"] == 0.0
        and episode.values["tests_passed"] == 0.0
        and episode.reward == 0.0
    )


# Searches everything its process can reach (the harness's globals, every object, its stdin, its files, its
# command line) for a string that starts with "secret-" and ends with its input, and returns the first it finds.
SEARCHER = """
import gc, os, sys
def find(i):
    suffix = "-" + str(i)
    places = [repr(vars(sys.modules["__main__"])), repr(gc.get_objects())]
    for name in os.listdir("."):
        if os.path.isfile(name):
            places.append(open(name, errors="replace").read())
    places.append(open("/proc/self/cmdline", errors="replace").read())
    places.append(repr(sys.argv))
    for text in places:
        for word in text.replace("'", " ").replace('"', " ").split():
            if word.startswith("secret-") and word.endswith(suffix):
                return word
    return "not found"
"""


def test_the_expected_values_never_enter_the_sandbox(env):
    secret = secrets.token_hex(8)
    hidden = [[[i], f"secret-{secret}-{i}"] for i in range(3)]
    examples = [[[i], f"secret-{secret}-{i}"] for i in range(3, 5)]
    searched = run_tests(env.sandbox, SEARCHER, "find", hidden, examples)
    assert searched.passed == 0 and searched.total == 3 and searched.shown_passed == 0, searched
    assert searched.feedback.count("returned 'not found'") == 2, searched.feedback


@pytest.mark.parametrize(
    ("name", "code"),
    [
        (
            "an __eq__ that says yes and a patched isinstance",
            "import builtins\nclass Yes:\n    def __eq__(self, other):\n        return True\n"
            "builtins.isinstance = lambda *a: True\n"
            "def {entry}(*args):\n    return Yes()\n",
        ),
        ("an int that equals everything", "class Int(int):\n    def __eq__(self, o):\n        return True\n"
         "    __hash__ = int.__hash__\ndef {entry}(*args):\n    return Int(5)\n"),
        ("an early exit", "import os\ndef {entry}(*args):\n    os._exit(0)\n"),
        ("a SystemExit", "def {entry}(*args):\n    raise SystemExit(0)\n"),
    ],
)  # fmt: skip
def test_a_value_that_cheats_or_a_run_that_leaves_early_passes_nothing(env, spec, name, code):
    run = judged(env, spec, code.format(entry=spec["entry_point"]))
    assert run.passed == 0 and not run.all_passed, (name, run.feedback)


def test_answers_written_on_the_harnesss_behalf_do_no_better_than_returning_a_constant(env, spec):
    # The code writes "loaded" and a run of answers on every descriptor it may write to: at best the value it
    # picked, the same as a function returning that value.
    forger = (
        "import os, json\n"
        "for fd in range(1, 12):\n"
        "    try:\n"
        "        os.write(fd, ''.join(json.dumps(m) + '\\n' for m in [{'loaded': True}] + [{'value': True}] * 20).encode())\n"
        "    except OSError:\n"
        "        pass\n"
        f"def {spec['entry_point']}(*args):\n    return False\n"
    )
    constant = f"def {spec['entry_point']}(*args):\n    return True\n"
    total = len(json.loads(spec["tests"]))
    assert judged(env, spec, forger).passed <= judged(env, spec, constant).passed < total


def raising_on(spec: dict, args: list) -> str:
    """The reference, but raising on the call with `args`."""
    problem = make_problem(spec["seed"], spec["stratum"])
    return problem.reference + (
        f"\n_reference = {spec['entry_point']}\n"
        f"def {spec['entry_point']}(*args):\n"
        f"    if list(args) == {args!r}:\n"
        "        raise ValueError('only this one')\n"
        "    return _reference(*args)\n"
    )


def test_an_exception_on_an_example_fails_it_only_and_is_shown(env, spec):
    run = judged(env, spec, raising_on(spec, json.loads(spec["examples"])[0][0]))
    assert run.shown_passed == run.shown_total - 1 and "raised ValueError: only this one" in run.feedback
    assert run.all_passed and not run.examples_ok, run


def test_a_hidden_test_s_failure_is_never_told(env, spec):
    run = judged(env, spec, raising_on(spec, json.loads(spec["tests"])[0][0]))
    assert run.passed == run.total - 1 and run.examples_ok, run
    assert run.feedback == f"All {run.shown_total} example tests passed."


def test_a_neighbours_fork_bomb_does_not_fail_a_correct_program(env, spec):
    # One episode holds every process its limit allows while another runs its reference: the reference passes.
    holder = (
        "import os, time\nfor _ in range(40):\n    try:\n        pid = os.fork()\n    except OSError:\n"
        "        break\n    if pid == 0:\n        time.sleep(3)\n        os._exit(0)\ntime.sleep(3)\n"
        f"def {spec['entry_point']}(*args):\n    return None\n"
    )
    results = {}
    bomb = threading.Thread(target=lambda: results.update(bomb=judged(env, spec, holder)))
    bomb.start()
    time.sleep(1.0)  # its processes are held
    reference = judged(env, spec, make_problem(spec["seed"], spec["stratum"]).reference)
    holding = bomb.is_alive()
    bomb.join()
    assert holding and reference.all_passed and reference.stopped is None, reference.feedback
    assert results["bomb"].passed == 0


@pytest.mark.parametrize(
    "value",
    [None, True, 0, -(2**40000), 2.5, float("inf"), "é", b"\x00x", [1, (2, 3)], {"a": {4: [None]}},
     {1, 2}, frozenset({"x"}), ((),)],
    ids=lambda value: type(value).__name__,  # str() of the huge int is refused
)  # fmt: skip
def test_plain_data_travels_as_itself(value):
    # -(2**40000) has ~12,000 digits: past what json may write in decimal, it travels in hex
    back = wire.decode(json.loads(json.dumps(wire.encode(value))))
    assert back == value and type(back) is type(value)


def test_anything_else_travels_as_an_opaque_repr_and_malformed_answers_are_refused():
    class Yes(list):
        def __eq__(self, other):
            return True

    assert type(wire.decode(wire.encode(Yes([1])))) is list  # a subclass travels as its base's value
    opaque = wire.decode(json.loads(json.dumps(wire.encode(object()))))
    assert opaque != opaque and repr(opaque).startswith("<object object")
    for bad in (
        {"list": 1},
        {"dict": [[{"list": []}, 1]]},
        {"set": [{"list": []}]},
        {"x": 1},
        [1],
        {"a": 1, "b": 2},
    ):
        with pytest.raises(ValueError):
            wire.decode(bad)
