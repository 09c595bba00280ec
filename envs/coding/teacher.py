"""The scripted teacher: reads the problem back from the user's message and runs its reference solution through
`run_tests` (HumanEval's problems, the held-out side, it gives up on). On a share `slip` of the problems it first submits a plausible wrong solution (the family's usual
bug); told which tests fail, it fixes the code on half of those (a second `run_tests` with the reference) and
gives up on the other half (its wrong code as the final reply). So its SFT episodes show first tries and fixes,
and curation drops the ones that gave up.
"""

from __future__ import annotations

import json
import random

from envs.coding.humaneval import is_humaneval
from envs.coding.problems import read_problem
from wander.core.policy import Conversation, Reply, UnplayableRequest

RUN_TESTS = "run_tests"
FIX_SHARE = 0.5  # of the slips, the share the teacher fixes after reading the failures
GIVE_UP = (
    "I cannot solve this problem."  # its reply to a HumanEval problem: it knows the generated families only
)


def tool_call(name: str, code: str) -> str:
    """The text of one tool call on `code`, as the env's protocol reads it."""
    return f"<tool_call>{json.dumps({'name': name, 'arguments': {'code': code}})}</tool_call>"


def final_reply(code: str) -> str:
    """A reply without a tool call: the code submitted as it is, in a fenced block."""
    return f"```python\n{code.rstrip()}\n```"


class CodingTeacher:
    """The coding teacher with slip rate `slip`. Whether it slips and whether it fixes the slip are drawn from the
    problem alone, never from `seed`: the embedded server builds a teacher for every turn, and an episode's plan
    must hold across its turns."""

    scripted = True

    def __init__(self, slip: float = 0.0, seed: int = 0):
        self.slip, self.seed = slip, seed

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        """The next message of each conversation."""
        return [Reply(self.reply(c)) for c in conversations]

    def reply(self, conversation: Conversation) -> str:
        """The next message of this teacher in one conversation: a `run_tests` call or the final code."""
        last = conversation[-1] if conversation else None
        if not isinstance(last, dict) or last.get("role") not in ("user", "tool"):
            raise UnplayableRequest("the last message is neither the user's nor a tool result")
        prompt = next((m.get("content") for m in conversation if m.get("role") == "user"), None)
        if isinstance(prompt, str) and is_humaneval(prompt):
            return GIVE_UP
        try:
            problem = read_problem(prompt if isinstance(prompt, str) else "")
        except ValueError as exc:
            raise UnplayableRequest(str(exc)) from None
        rng = random.Random(f"coding-teacher:{problem.prompt}")
        slipped, fixes = rng.random() < self.slip, rng.random() < FIX_SHARE
        tries = sum(m.get("role") == "tool" for m in conversation)
        if tries == 0:
            return tool_call(RUN_TESTS, problem.buggy if slipped else problem.reference)
        passed = str(last.get("content", "")).startswith("All ")
        if passed:  # only where the episode goes on after passing (TRL's tool loop): submit what passed
            return final_reply(problem.buggy if slipped and tries == 1 else problem.reference)
        if slipped and fixes and tries == 1:
            return tool_call(RUN_TESTS, problem.reference)
        return final_reply(problem.buggy if slipped else problem.reference)
