"""Coding: write a Python function, check it on example tests, fix it from their failures, be judged on hidden
tests, in a sandbox nothing escapes. Problems are generated from the episode seed with reference solutions, example
tests and hidden tests (`problems.py`), stratified by difficulty. Two tools run the model's code, each run in a
fresh sandbox (`wander.core.sandbox`): `run_tests` (the problem's example tests; the failing ones come back, and
the hidden tests run unseen on the same code) and `run_code` (a program; its output comes back). The episode ends
when the examples pass, when the model replies without a tool call (a fenced code block in that reply is its final
submission, tested too), or at `max_turns`. The reward is all or nothing on the hidden tests of the last
submission: code that special-cases the examples it was shown passes them and scores 0. The share of hidden tests
passed, of examples passed, and the style of passing code (ruff's findings) are zero-weight metrics.
`load_environment(**kwargs)`: its keyword defaults are the env's config.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import json
import math
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from envs.coding.execution import TestRun, run_program
from envs.coding.execution import run_tests as judge_tests
from envs.coding.humaneval import SPLIT as HUMANEVAL
from envs.coding.humaneval import humaneval_specs
from envs.coding.problems import MAX_STRATA, call_text, make_problem
from envs.coding.prompt_splits import disjoint_split_specs
from envs.coding.teacher import RUN_TESTS, CodingTeacher, final_reply, tool_call
from wander.core.evaluation_suite import EvaluationSuite
from wander.core.parser import last_assistant_content
from wander.core.pipeline_hooks import FRAME_TOKENS, text_tokens
from wander.core.policy import Message, Policy
from wander.core.rubric import Rubric
from wander.core.sandbox import Sandbox, SandboxLimits
from wander.core.splits import SPLIT_SEEDS, SeededSplits
from wander.core.tool_env import TOOL_CALL, ToolEnv

SYSTEM_PROMPT = (
    "Write the Python function the user asks for. Check it with the run_tests tool, which runs example tests and "
    "shows the ones that fail; fix the code until every example passes. Your last code is judged on hidden tests."
)
CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
LINT_RULES = "E,F,W,B"  # pycodestyle, pyflakes, bugbear: findings a reviewer would ask to fix
STYLE_FINDINGS = 4  # findings at which style reaches 0 (each costs a quarter)
LONGEST_FEEDBACK = 1000  # characters of a run_tests answer at most (its shown failures are clipped)

_EPISODE: contextvars.ContextVar[tuple[CodingEnv, dict] | None] = contextvars.ContextVar(
    "coding_episode", default=None
)


@contextmanager
def bound(env: CodingEnv, state: dict) -> Iterator[None]:
    """Make this episode the one the tools run for, for the calls inside the block."""
    token = _EPISODE.set((env, state))
    try:
        yield
    finally:
        _EPISODE.reset(token)


def _episode() -> tuple[CodingEnv, dict]:
    current = _EPISODE.get()
    if current is None:
        raise RuntimeError("no episode is bound: call the tools through the environment")
    return current


def run_tests(code: str) -> str:
    """Run the problem's example tests on your code and see which fail (your last code is judged on hidden tests).

    Args:
        code: the whole Python source defining the function the problem asks for
    """
    env, state = _episode()
    return env.submit(state, _source(code)).feedback


def run_code(code: str) -> str:
    """Run a Python program and see its exit status and output.

    Args:
        code: the whole Python source of the program
    """
    env, state = _episode()
    shown, execution = run_program(env.sandbox, _source(code))
    state["exec_seconds"] = state.get("exec_seconds", 0.0) + execution.seconds
    if execution.returncode is None:
        state.setdefault("stops", []).append(execution.reason)
    return shown


def _source(code: object) -> str:
    if not isinstance(code, str):
        raise TypeError(f"code must be a string of Python source, got {type(code).__name__}")
    return code


TOOLS = {f.__name__: f for f in (run_tests, run_code)}


def lint_findings(code: str) -> int:
    """ruff's findings on `code` (it reads the code, never runs it); a file it cannot parse counts as one."""
    from ruff.__main__ import find_ruff_bin  # lazy: only scoring needs it

    argv = [find_ruff_bin(), "check", "--isolated", "--select", LINT_RULES, "--output-format", "json"]
    done = subprocess.run(
        [*argv, "--stdin-filename", "solution.py", "-"],
        input=code,
        capture_output=True,
        text=True,
        check=False,
    )
    return len(json.loads(done.stdout or "[]"))


@functools.cache
def longest_code(strata: int, seeds: int = 500) -> str:
    """The longest reference or buggy solution of the first `strata` strata over seeds 0..seeds-1."""
    problems = [make_problem(seed, k) for k in range(strata) for seed in range(seeds)]
    return max((code for p in problems for code in (p.reference, p.buggy)), key=len)


def _last(state: dict) -> dict | None:
    submissions = state.get("submissions") or []
    return submissions[-1] if submissions else None


def _findings(last: dict) -> int:
    """ruff's findings on the last code, counted once when first asked for (style and lint both read them)."""
    if "lint" not in last:
        last["lint"] = lint_findings(last.pop("code"))
    return last["lint"]


def all_passed(state: dict) -> float:
    """1 when the last code submitted passes every hidden test: the reward, all or nothing."""
    last = _last(state)
    return float(bool(last) and last["passed"] == last["total"] > 0)


def examples_passed(state: dict) -> float:
    """The share of example tests the last code submitted passes (above tests_passed: fitted to what it was shown)."""
    last = _last(state)
    return last["shown_passed"] / last["shown_total"] if last and last["shown_total"] else 0.0


def tests_passed(state: dict) -> float:
    """The share of hidden tests the last code submitted passes."""
    last = _last(state)
    return last["passed"] / last["total"] if last and last["total"] else 0.0


def style(state: dict) -> float:
    """1 - a quarter per lint finding of the last code, floored at 0; 0 unless that code passes a test."""
    last = _last(state)
    if not last or not last["passed"]:
        return 0.0
    return max(0.0, 1.0 - _findings(last) / STYLE_FINDINGS)


def first_passed(state: dict) -> float:
    """1 when the first code submitted passes every hidden test (all_passed - first_passed: fixed in a later turn)."""
    submissions = state.get("submissions") or []
    return float(bool(submissions) and submissions[0]["passed"] == submissions[0]["total"] > 0)


def submissions(state: dict) -> float:
    """Codes submitted to the tests in the episode."""
    return float(len(state.get("submissions") or []))


def reply_format(state: dict) -> float:
    """The share of replies that are well formed: tool calls that parse and name a tool, or a fenced code block."""
    return state.get("good_replies", 0) / state["turn"] if state.get("turn") else 0.0


def tool_errors(state: dict) -> float:
    """Tool calls that failed (bad JSON, unknown tool, code not a string)."""
    return float(state.get("tool_errors", 0))


def lint(state: dict) -> float:
    """ruff's findings on the last code submitted (0 without one)."""
    last = _last(state)
    return float(_findings(last)) if last else 0.0


def exec_seconds(state: dict) -> float:
    """Seconds the episode's code ran in the sandbox, all runs together."""
    return float(state.get("exec_seconds", 0.0))


def sandbox_stops(state: dict) -> float:
    """Runs the sandbox stopped (a limit or the timeout); their reasons are in the episode's state and messages."""
    return float(len(state.get("stops") or []))


class CodingEnv(SeededSplits, ToolEnv):
    """Python functions against hidden tests, fixed from their failures; strata are problem difficulties."""

    teacher_skill = 0.2  # the embedded teacher slips on a fifth of the problems, and fixes half of its slips
    # What the agent may not see: the hidden tests, and the examples' expected values but for the failures it is
    # shown (in the spec and the episode's state).
    private_spec_keys = frozenset({"tests", "examples"})
    private_state_keys = frozenset({"tests", "examples"})
    steps_block = True  # a step runs code for up to `timeout_s`: the server steps sessions on threads
    measured_keys = frozenset({"exec_seconds"})  # wall-clock seconds: a replay's differ

    def __init__(
        self,
        num_train: int,
        num_eval: int,
        num_test: int,
        seed: int,
        num_groups: int,
        specs_dir: str | None,
        max_turns: int,
        sandbox: Sandbox,
        heldout: str,
    ):
        rubric = Rubric()
        rubric.add(all_passed, 1.0)
        partial = (tests_passed, examples_passed, style, first_passed, submissions)
        for metric in (*partial, tool_errors, lint, exec_seconds, sandbox_stops):
            rubric.add(metric, 0.0)
        rubric.add(reply_format, 0.0, name="format")  # curation's format floor reads it
        super().__init__(
            tools=list(TOOLS.values()),
            rubric=rubric,
            system_prompt=SYSTEM_PROMPT,
            max_turns=max_turns,
            name="coding",
        )
        self.sandbox, self.heldout = sandbox, heldout
        self.init_splits(num_train, num_eval, num_test, seed, num_groups, specs_dir)

    def spec_fields(self, seed: int, stratum: int) -> dict:
        """The problem of a seed in a stratum: its text, function name, family, hidden and example tests (JSON)."""
        problem = make_problem(seed, stratum)
        return {
            "problem": problem.prompt,
            "entry_point": problem.entry_point,
            "family": problem.family,
            "tests": json.dumps([[list(args), expected] for args, expected in problem.tests]),
            "examples": json.dumps([[list(args), expected] for args, expected in problem.examples]),
        }

    def split_specs(self, split: str) -> list[dict]:
        """The generate stage's files, or the split's seeds with no problem text shared between train and the rest
        (`prompt_splits.py`)."""
        return super().split_specs(split) if self.specs_dir is not None else disjoint_split_specs(self, split)

    def get_dataset(self, split: str = "train"):
        """A split of generated problems, or HumanEval's 164 (`humaneval`: evaluation only)."""
        if split != HUMANEVAL:
            return super().get_dataset(split)
        if split not in self._splits:
            from datasets import Dataset

            self._splits[split] = Dataset.from_list(humaneval_specs(self.num_groups))
        return self._splits[split]

    def setup_state(self, spec: dict) -> dict:
        """The tests the tools run, from the spec."""
        return {
            "entry_point": spec["entry_point"],
            "tests": json.loads(spec["tests"]),
            "examples": json.loads(spec["examples"]),
        }

    def initial_messages(self, spec: dict, state: dict) -> list[Message]:
        """The instruction with the tools, then the problem."""
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": spec["problem"]},
        ]

    def submit(self, state: dict, code: str) -> TestRun:
        """Run `code` on the episode's example and hidden tests and record it as its latest submission."""
        run = judge_tests(self.sandbox, code, state["entry_point"], state["tests"], state["examples"])
        submitted = state.setdefault("submissions", [])
        if submitted:  # only the last code is scored for style: an earlier one is never linted
            submitted[-1].pop("code", None)
        submitted.append(
            {
                "passed": run.passed,
                "total": run.total,
                "shown_passed": run.shown_passed,
                "shown_total": run.shown_total,
                "examples_ok": run.examples_ok,
                "code": code,
            }
        )
        state["exec_seconds"] = state.get("exec_seconds", 0.0) + run.seconds
        if run.stopped:
            state.setdefault("stops", []).append(run.stopped)
        return run

    def call_tool(self, raw: str, state: dict) -> str:
        """Run one tool call for this episode."""
        with bound(self, state):
            return super().call_tool(raw, state)

    def env_response(self, messages: list[Message], state: dict) -> list[Message]:
        """Tool calls run (the episode ends once the examples pass); a reply without one ends it, its code
        submitted."""
        content = last_assistant_content(messages) or ""
        if not TOOL_CALL.search(content):
            block = CODE_BLOCK.search(content)
            if block:
                self.submit(state, block.group(1))
            state["good_replies"] = state.get("good_replies", 0) + bool(block)
            state["done"] = True
            return []
        errors = state.get("tool_errors", 0)
        answers = super().env_response(messages, state)
        state["good_replies"] = state.get("good_replies", 0) + (state.get("tool_errors", 0) == errors)
        last = _last(state)
        state["done"] = bool(last and last["examples_ok"])
        return answers

    def reply_tokens(self) -> int:
        """The teacher's longest reply (a tool call or the final block of the longest code of the strata's problems
        over a fixed sample of seeds), for any tokenizer."""
        longest = longest_code(self.num_groups)
        return text_tokens(max(tool_call(RUN_TESTS, longest), final_reply(longest), key=len))

    def completion_tokens(self) -> int:
        """Every turn at the reply budget, and between turns the longest `run_tests` answer in its frame."""
        between = text_tokens("x" * LONGEST_FEEDBACK) + FRAME_TOKENS
        return self.max_turns * self.reply_tokens() + (self.max_turns - 1) * between

    def corpus(self) -> Iterator[str]:
        """The instruction (repeated: a tokenizer learns it as few tokens), then each problem with the teacher's
        calls and final blocks, and the words of the tests' answers (nothing runs)."""
        yield from [self.system_prompt] * 100
        for split in SPLIT_SEEDS:
            for row in self.get_dataset(split):
                problem = make_problem(row["seed"], row["stratum"])
                yield problem.prompt
                for code in (problem.reference, problem.buggy):
                    yield tool_call(RUN_TESTS, code)
                    yield final_reply(code)
                shown = len(problem.examples)
                yield f"All {shown} example tests passed.\nPassed {shown - 1} of {shown} example tests."
                for args, expected in problem.examples:
                    yield f"{call_text(problem.entry_point, list(args))} returned {expected!r}, expected {expected!r}"

    def evaluation_suite(self) -> EvaluationSuite:
        """The rubric means per stratum on the eval split and the held-out side (HumanEval, or the generated test
        split); fewer tool errors, lint findings, seconds and stops are better."""
        lower = ("tool_errors", "lint", "exec_seconds", "sandbox_stops")
        suite = (
            super().evaluation_suite().lower_is_better(*lower).bounded(0.0, math.inf, *lower, "submissions")
        )
        shares = (
            "reward",
            "all_passed",
            "tests_passed",
            "examples_passed",
            "style",
            "first_passed",
            "format",
        )
        return dataclasses.replace(suite.bounded(0.0, 1.0, *shares), sides=("eval", self.heldout))

    def curation_defaults(self) -> dict:
        """Solved problems only: the teacher's unfixed slips are what curation removes."""
        return {"allowed_outcomes": [], "min_values": {"all_passed": 1.0}}

    def teacher_policy(self, skill: float, seed: int) -> Policy:
        """The scripted teacher with slip rate `skill`."""
        return CodingTeacher(skill, seed)


def load_environment(
    num_train: int = 1000,
    num_eval: int = 100,
    num_test: int = 100,
    seed: int = 0,
    num_groups: int = MAX_STRATA,
    specs_dir: str | None = None,
    max_turns: int = 5,
    timeout_s: float = 5.0,
    cpu_s: int = 2,
    memory_mb: int = 256,
    parallel: int = 2,
    heldout: str = HUMANEVAL,
) -> CodingEnv:
    """The coding env: split sizes, split seed, difficulty strata, generated specs, turn limit, each run's sandbox
    limits (wall-clock and CPU seconds, memory), how many runs go at once, and the evaluation's held-out side
    (`humaneval`, or `test`: the generated test split)."""
    if heldout not in (HUMANEVAL, "test"):
        raise ValueError(f"heldout must be 'humaneval' or 'test', got {heldout!r}")
    if not 1 <= num_groups <= MAX_STRATA:
        raise ValueError(f"num_groups must be within 1..{MAX_STRATA}, got {num_groups}")
    if max_turns < 2:
        raise ValueError(f"max_turns {max_turns} leaves no turn to fix the code after the first test run")
    limits = SandboxLimits(wall_seconds=timeout_s, cpu_seconds=cpu_s, memory_mb=memory_mb)
    return CodingEnv(
        num_train,
        num_eval,
        num_test,
        seed,
        num_groups,
        specs_dir,
        max_turns,
        Sandbox(limits, parallel),
        heldout,
    )
