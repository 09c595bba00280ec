"""Running a model's code in the sandbox (`wander.core.sandbox`): its program as it is (`run_code`), or its function
judged on a problem's example and hidden tests (`run_tests`), and what the model reads back: the examples' verdict
only, so no hidden test's input, value or verdict ever reaches the model.

The tests are judged outside the model's process: what enters the sandbox is the model's code and, one call at a
time, a test's inputs; the function's values come back as plain data (`envs/coding/wire.py`) on a line of the
sandbox's stdout, and this process compares them with the expected values, which never leave it. HumanEval's
`check(candidate)` runs here too, its `candidate` a stand-in that calls the model's function in the sandbox.
Whatever the code does in its own process (call the harness, read its stdin, patch builtins, exit early, write
lines of its own, raise) can only make its own values wrong: it never sees an expected value or a verdict.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

from envs.coding.problems import call_text
from envs.coding.wire import decode, encode
from wander.core.sandbox import Execution, Sandbox, SandboxProcess, limit_hit

SOLUTION = "solution.py"
HARNESS = "harness.py"
WIRE = "wire.py"
WIRE_SOURCE = Path(__file__).with_name(WIRE).read_text()  # the same module, for the sandbox's harness
SHOWN_FAILURES = 3  # failing tests quoted back: enough to fix from, short enough for a small model's context
SHOWN_CHARS = 600  # characters of a program's output quoted back by run_code
VALUE_CHARS = 120  # characters of one returned value or error quoted back

# Runs in the sandbox with the system's python3 (the standard library only): loads the code, says whether it
# loaded, then for each line of inputs on stdin answers one line with the value or the error. The answers go to
# a copy of stdout taken before the code loads; the code's own prints go to stderr.
HARNESS_SOURCE = r"""
import json, os, sys
sys.path.insert(0, os.getcwd())
import wire
answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)
sys.stdout = sys.stderr
def answer(**message):
    answers.write(json.dumps(message) + "\n")
    answers.flush()
entry = sys.argv[1]
try:
    namespace = {"__name__": "solution"}
    with open("solution.py", encoding="utf-8") as f:
        exec(compile(f.read(), "solution.py", "exec"), namespace)
    func = namespace.get(entry)
    if not callable(func):
        raise NameError(f"the code defines no function named {entry}")
except BaseException as exc:
    answer(load_error=f"{type(exc).__name__}: {exc}")
    raise SystemExit(0)
answer(loaded=True)
for line in sys.stdin:
    try:
        answer(value=wire.encode(func(*wire.decode(json.loads(line)))))
    except Exception as exc:
        answer(error=f"{type(exc).__name__}: {exc}")
"""


class _Stopped(BaseException):
    """The run ended before it answered (a limit, the timeout, an exit): no test after this one ran.

    A BaseException, so that a check's own `except Exception` does not take it for a failed assertion."""


class _Raised(Exception):
    """The model's function raised: its error, in words, as the judge shows it."""


class Candidate:
    """The model's function as the judge calls it: its inputs go to the sandbox, its value comes back decoded."""

    def __init__(self, process: SandboxProcess):
        self.process = process

    def __call__(self, *args: object) -> object:
        self.process.send(json.dumps(encode(list(args))) + "\n")
        message = _answer(self.process)
        if message is None:
            raise _Stopped
        if "error" in message:
            raise _Raised(str(message["error"]))
        try:
            return decode(message.get("value"))
        except (ValueError, TypeError, RecursionError):
            raise _Raised("its value could not be read back (not plain data)") from None


def _answer(process: SandboxProcess) -> dict | None:
    """The harness's next answer; None when the run stopped first. A line that is not an answer (the code wrote
    on the answers' descriptor) stands for a value that cannot be read."""
    line = process.readline()
    if line is None:
        return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return {"error": "its answer could not be read back"}
    return message if isinstance(message, dict) else {"error": "its answer could not be read back"}


def judge_cases(candidate: Candidate, cases: list) -> list[dict]:
    """Each `[args, expected]` case: passed when the value equals the expected one and is not a bool standing for
    a number (or the reverse), as `True == 1` would in Python."""
    results = []
    for args, expected in cases:
        try:
            got = candidate(*copy.deepcopy(args))
        except _Raised as error:
            results.append({"ok": False, "error": str(error)})
            continue
        same = got == expected and isinstance(got, bool) == isinstance(expected, bool)
        results.append({"ok": bool(same), "got": repr(got)})
    return results


def judge_check(candidate: Candidate, entry_point: str, tests: dict) -> list[dict]:
    """HumanEval's test: its prompt (the helpers its check calls) and its `check(candidate)`, run here, one test."""
    namespace: dict = {"__name__": "tests"}
    # The dataset's code, not the model's; a check that calls the function by its name (HumanEval/33) calls the
    # model's, as HumanEval's own evaluation (prompt + completion in one module) does.
    exec(compile(tests.get("prompt", ""), "prompt.py", "exec"), namespace)
    namespace[entry_point] = candidate
    exec(compile(tests["check"], "tests.py", "exec"), namespace)
    try:
        namespace["check"](candidate)
    except _Raised as error:
        return [{"ok": False, "error": str(error)}]
    except Exception as error:
        return [{"ok": False, "error": f"{type(error).__name__}: {error}"}]
    return [{"ok": True, "got": "passed"}]


@dataclass
class TestRun:
    """The verdict of one code on a problem's hidden tests, and what the model reads back from its examples."""

    passed: int
    """Hidden tests passed."""
    total: int
    """Hidden tests."""
    feedback: str
    """What the model reads back: the examples all passed, or their failures (never a hidden test)."""
    seconds: float
    stopped: str | None = None
    """Why the sandbox stopped the run (a limit, the timeout), or None."""
    shown_passed: int = 0
    """Example tests passed."""
    shown_total: int = 0
    """Example tests."""
    examples_ok: bool = False
    """The code loaded and passed every example (true of loaded code when the problem has none)."""

    @property
    def all_passed(self) -> bool:
        """Every hidden test passed."""
        return self.total > 0 and self.passed == self.total


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _judge(
    process: SandboxProcess, entry_point: str, examples: list, tests: list | dict
) -> list[dict | None]:
    """Each example's result, then each hidden test's; None for those a stop left unjudged."""
    candidate = Candidate(process)
    results: list[dict | None] = []
    hidden_total = 1 if isinstance(tests, dict) else len(tests)
    try:
        results.extend(judge_cases(candidate, examples))
        if isinstance(tests, dict):
            results.extend(judge_check(candidate, entry_point, tests))
        else:
            results.extend(judge_cases(candidate, tests))
    except _Stopped:
        return results + [None] * (len(examples) + hidden_total - len(results))
    process.send("", close=True)  # no more inputs: the harness ends, and with it the run
    process.wait()
    return results


def _passes(results: list[dict | None]) -> int:
    """How many of `results` passed (None: a test the run never reached)."""
    return sum(bool(r and r.get("ok")) for r in results)


def _example_feedback(entry_point: str, examples: list, results: list[dict]) -> str:
    """What the model reads of the examples: all passed, or the first failures with their expected values."""
    passed = _passes(results)
    if not examples:
        return "Your code loaded; this problem shows no example tests to run."
    if passed == len(examples):
        return f"All {len(examples)} example tests passed."
    lines = [f"Passed {passed} of {len(examples)} example tests."]
    for (args, expected), result in zip(examples, results, strict=True):
        if result.get("ok") or len(lines) > SHOWN_FAILURES:
            continue
        call = _clip(call_text(entry_point, args), VALUE_CHARS)
        if "error" in result:
            lines.append(f"{call} raised {_clip(result['error'], VALUE_CHARS)}")
        else:
            lines.append(
                f"{call} returned {_clip(str(result.get('got')), VALUE_CHARS)}, expected {_clip(repr(expected), VALUE_CHARS)}"
            )
    return "\n".join(lines)


def run_tests(
    sandbox: Sandbox, code: str, entry_point: str, tests: list | dict, examples: list | None = None
) -> TestRun:
    """Judge `code`'s function `entry_point` on `examples` then the hidden `tests`, in one fresh sandbox; the
    feedback tells the examples' verdict only. Tests are [[args, expected], ...] or HumanEval's {"check": source,
    "prompt": source} (one test: `check(candidate)`); examples are [[args, expected], ...]."""
    examples = examples or []
    total = 1 if isinstance(tests, dict) else len(tests)
    files = {HARNESS: HARNESS_SOURCE, WIRE: WIRE_SOURCE, SOLUTION: code}
    results: list[dict | None] | None = None
    with sandbox.open(["python3", "-I", HARNESS, entry_point], files=files) as process:
        loaded = _answer(process)
        if loaded is not None and loaded.get("loaded") is True:
            results = _judge(process, entry_point, examples, tests)
    execution = process.execution
    # Answers and then a stop: the code left something running past its tests (a thread, a child).
    late_stop = execution.reason if execution.returncode is None else None
    if loaded is not None and "load_error" in loaded:
        error = str(loaded["load_error"])
        limit = limit_hit(error, sandbox.limits)  # caught in the harness: a MemoryError, a failed fork
        shown = f"{_clip(error, 2 * VALUE_CHARS)}" + (f" ({limit})" if limit else "")
        return TestRun(
            0,
            total,
            f"Your code did not load: {shown}",
            execution.seconds,
            limit or late_stop,
            0,
            len(examples),
        )
    shown = (results or [])[: len(examples)]
    if results is None or None in shown:
        unread = loaded is not None and "loaded" not in loaded  # the code wrote over its first answer
        reason = "its answers could not be read back" if unread else execution.reason
        reason = reason or "the code ended the run before its tests finished"
        shown_passed = _passes(shown)
        return TestRun(
            0,
            total,
            f"The tests were stopped: {reason}.",
            execution.seconds,
            reason,
            shown_passed,
            len(examples),
        )
    hidden = results[len(examples) :]
    # A stop during the hidden tests fails them, and is not told: the examples' verdict is all the model reads.
    stopped = late_stop or (execution.reason if None in hidden else None)
    shown_passed = _passes(shown)
    return TestRun(
        _passes(hidden),
        total,
        _example_feedback(entry_point, examples, shown),
        execution.seconds,
        stopped,
        shown_passed,
        len(examples),
        shown_passed == len(examples),
    )


def run_program(sandbox: Sandbox, code: str) -> tuple[str, Execution]:
    """Run `code` as a program in a fresh sandbox; what the model reads back and the execution."""
    execution = sandbox.run(["python3", "-I", "main.py"], files={"main.py": code})
    head = execution.reason or "exit status 0"
    parts = [head if execution.returncode is not None else f"stopped: {head}"]
    for name, text in (("stdout", execution.stdout), ("stderr", execution.stderr)):
        if text.strip():
            tail = text if len(text) <= SHOWN_CHARS else "..." + text[-SHOWN_CHARS:]
            parts.append(f"{name}:\n{tail.rstrip()}")
    return "\n".join(parts), execution
