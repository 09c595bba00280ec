"""`serialize_ast_parse`: on CPython 3.11.0-3.11.7 two threads parsing at once fail with `SystemError: AST constructor
recursion depth mismatch` (gh-106905); after it, they do not. Each run in its own interpreter: the race needs a
tiny switch interval and garbage with finalizers, which the test process should not keep."""

from __future__ import annotations

import ast
import subprocess
import sys

from wander.core.parse_lock import AFFECTED, serialize_ast_parse

# A big parse on the main thread, small ones on another, each after garbage whose finalizers run Python code
# (a collection inside the AST constructor hands the GIL over there): prints how many parses failed.
RACE = """
import ast, sys, threading, time
if sys.argv[1] == "serialized":
    from wander.core.parse_lock import serialize_ast_parse
    serialize_ast_parse()
class Cycle:
    def __del__(self):
        pass
def garbage():
    for _ in range(100):
        cycle = Cycle()
        cycle.self = cycle
failed = []
done = threading.Event()
def small():
    while not done.is_set():
        try:
            garbage()
            ast.parse("def f(a, b=1): pass")
        except SystemError as exc:
            failed.append(exc)
sys.setswitchinterval(1e-6)
source = open(ast.__file__).read()
thread = threading.Thread(target=small)
thread.start()
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end and not failed:
    try:
        garbage()
        ast.parse(source)
    except SystemError as exc:
        failed.append(exc)
done.set()
thread.join()
print(len(failed))
"""


def failed_parses(mode: str, seconds: float) -> int:
    """How many parses the race above failed in `seconds` (it stops at the first)."""
    out = subprocess.run(
        [sys.executable, "-c", RACE, mode, str(seconds)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(out.stdout.split()[-1])


def test_concurrent_parses_fail_on_the_affected_releases_and_not_once_serialized() -> None:
    assert failed_parses("serialized", 3) == 0
    # The unprotected race: it fails within a second on 3.11.7; a fixed release parses through.
    assert (failed_parses("plain", 20) > 0) == AFFECTED


def test_serializing_wraps_parse_once_and_only_where_needed() -> None:
    import tasks.params.section_base  # noqa: F401  (its import serializes, before its classes parse)

    wrapped = ast.parse
    assert getattr(wrapped, "__wander_serialized__", False) == AFFECTED
    serialize_ast_parse()
    assert ast.parse is wrapped
    assert (
        ast.dump(ast.parse("x = 1"))
        == "Module(body=[Assign(targets=[Name(id='x', ctx=Store())], value=Constant(value=1))], type_ignores=[])"
    )


# A thread holds the lock (as in the middle of a parse) while the process forks: the child must parse at once.
FORK = """
import ast, os, sys, threading, time
from wander.core import parse_lock
parse_lock.serialize_ast_parse()
held, release = threading.Event(), threading.Event()
def hold():
    with parse_lock._LOCK:
        held.set()
        release.wait()
threading.Thread(target=hold, daemon=True).start()
held.wait()
pid = os.fork()
if pid == 0:
    ast.parse("x = 1")
    os._exit(0)
end = time.monotonic() + 20
while time.monotonic() < end:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print("parsed" if status == 0 else "failed")
        break
    time.sleep(0.05)
else:
    os.kill(pid, 9)
    print("hung")
release.set()
"""


def test_a_child_forked_while_another_thread_holds_the_lock_parses() -> None:
    out = subprocess.run([sys.executable, "-c", FORK], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split()[-1] == "parsed"
