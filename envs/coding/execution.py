"""Running a model's code in the sandbox (`wander.core.sandbox`): its program as it is (`run_code`), or its function
against a problem's hidden tests (`run_tests`), and what the model reads back.

The tests never touch a file: the harness reads a fresh nonce and the tests from its stdin before the model's code
is loaded, and prints its verdict on one line that starts with the nonce, so text the code prints cannot pass for
a verdict by accident. Code run in the same process could still read the harness's memory on purpose; the
sandbox keeps such code from the machine, not from its own tests (docs/sandbox.md).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass

from envs.coding.problems import call_text
from wander.core.sandbox import Execution, Sandbox, limit_hit

SOLUTION = "solution.py"
HARNESS = "harness.py"
SHOWN_FAILURES = 3  # failing tests quoted back: enough to fix from, short enough for a small model's context
SHOWN_CHARS = 600  # characters of a program's output quoted back by run_code
VALUE_CHARS = 120  # characters of one returned value or error quoted back

# Runs in the sandbox with the system's python3 (the standard library only). A test passes when the value equals
# the expected one and is not a bool standing for a number (or the reverse): `True == 1` in Python.
HARNESS_SOURCE = r"""
import copy, json, sys
nonce = sys.stdin.readline().strip()
entry, cases = json.loads(sys.stdin.readline())
sys.stdin.close()
def verdict(payload):
    sys.stdout.write("\n" + nonce + json.dumps(payload) + "\n")
    sys.stdout.flush()
try:
    namespace = {"__name__": "solution"}
    with open("solution.py", encoding="utf-8") as f:
        exec(compile(f.read(), "solution.py", "exec"), namespace)
    func = namespace.get(entry)
    if not callable(func):
        raise NameError(f"the code defines no function named {entry}")
except BaseException as exc:
    verdict({"load_error": f"{type(exc).__name__}: {exc}"})
    raise SystemExit(0)
results = []
if isinstance(cases, dict):  # HumanEval's tests: check(candidate) asserts, one test
    try:
        checks = dict(namespace)  # as HumanEval's own evaluation: the tests run after the code, in its module
        exec(compile(cases["check"], "tests.py", "exec"), checks)
        checks["check"](func)
        results.append({"ok": True, "got": "passed"})
    except Exception as exc:
        results.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
    cases = []
for args, expected in cases:
    try:
        got = func(*copy.deepcopy(args))
        same = got == expected and isinstance(got, bool) == isinstance(expected, bool)
        results.append({"ok": bool(same), "got": repr(got)})
    except Exception as exc:
        results.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
verdict({"results": results})
"""


@dataclass
class TestRun:
    """The verdict of one code on a problem's tests."""

    passed: int
    total: int
    feedback: str
    """What the model reads back: all passed, or the failures."""
    seconds: float
    stopped: str | None = None
    """Why the sandbox stopped the run (a limit, the timeout), or None."""

    @property
    def all_passed(self) -> bool:
        """Every test passed."""
        return self.total > 0 and self.passed == self.total


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _verdict(execution: Execution, nonce: str) -> dict | None:
    lines = [line for line in execution.stdout.splitlines() if line.startswith(nonce)]
    if not lines:
        return None
    try:
        return json.loads(lines[-1][len(nonce) :])
    except ValueError:
        return None


def run_tests(sandbox: Sandbox, code: str, entry_point: str, tests: list | dict) -> TestRun:
    """Run `code`'s function `entry_point` on `tests` in a fresh sandbox: [[args, expected], ...], or HumanEval's
    {"check": source} (one test: `check(candidate)`)."""
    nonce = secrets.token_hex(16)
    stdin = f"{nonce}\n{json.dumps([entry_point, tests])}\n"
    execution = sandbox.run(
        ["python3", "-I", HARNESS], files={HARNESS: HARNESS_SOURCE, SOLUTION: code}, stdin=stdin
    )
    verdict = _verdict(execution, nonce)
    checked = isinstance(tests, dict)
    tests = [[[], None]] if checked else tests  # HumanEval's check is one test
    total = len(tests)
    # A verdict and then a stop: the code left something running past its tests (a thread, a child).
    late_stop = execution.reason if execution.returncode is None else None
    if verdict is None:
        reason = execution.reason or "the code ended the run before its tests finished"
        return TestRun(0, total, f"The tests were stopped: {reason}.", execution.seconds, reason)
    if "load_error" in verdict:
        error = verdict["load_error"]
        limit = limit_hit(error, sandbox.limits)  # caught in the harness: a MemoryError, a failed fork
        shown = f"{_clip(error, 2 * VALUE_CHARS)}" + (f" ({limit})" if limit else "")
        return TestRun(0, total, f"Your code did not load: {shown}", execution.seconds, limit or late_stop)
    results = verdict.get("results", [])
    passed = sum(bool(r.get("ok")) for r in results)
    if len(results) == total and passed == total:
        return TestRun(passed, total, f"All {total} tests passed.", execution.seconds, late_stop)
    lines = [f"Passed {passed} of {total} tests."]
    for (args, expected), result in zip(tests, results, strict=False):
        if result.get("ok") or len(lines) > SHOWN_FAILURES:
            continue
        call = f"check({entry_point})" if checked else _clip(call_text(entry_point, args), VALUE_CHARS)
        if "error" in result:
            lines.append(f"{call} raised {_clip(result['error'], VALUE_CHARS)}")
        else:
            lines.append(
                f"{call} returned {_clip(str(result.get('got')), VALUE_CHARS)}, expected {_clip(repr(expected), VALUE_CHARS)}"
            )
    return TestRun(passed, total, "\n".join(lines), execution.seconds, late_stop)


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
