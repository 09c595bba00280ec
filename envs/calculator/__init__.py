"""Arithmetic word problems with calculator tools: the model may call `add`, `subtract`, `multiply` and `divide`
(typed functions run by `ToolEnv`) and ends with the exact whole-number answer in `<answer>`. Problems are made
from the episode seed (no download); the difficulty strata are the number of operations. With GRPO the tools run
through TRL's `environment_factory` (`wander.training.tools`). `load_environment(**kwargs)`: its keyword defaults
are the env's config."""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Iterator

from wander.core.evaluation_suite import EvaluationSuite
from wander.core.parser import XMLParser, last_assistant_content, parse_integer
from wander.core.pipeline_hooks import FRAME_TOKENS, text_tokens
from wander.core.policy import Conversation, Message, Policy, Reply, UnplayableRequest
from wander.core.rubric import Rubric
from wander.core.splits import SPLIT_SEEDS, SeededSplits
from wander.core.tool_env import ToolEnv

SYSTEM_PROMPT = (
    "Solve the word problem. Use the calculator tools for the arithmetic, then give the final whole number "
    "inside <answer></answer>."
)
NAMES = ("Ana", "Ben", "Chloe", "Dev", "Eli", "Fay", "Gus", "Hana")
ITEMS = ("apple", "marble", "card", "coin", "stamp", "shell", "book", "pencil")
# One sentence per operation, each naming its operand once: the problem reads as the chain of tool calls.
STEPS = {
    "add": "{name} finds {b} more {item}s.",
    "subtract": "{name} gives away {b} {item}s.",
    "multiply": "{name} then ends up with {b} times as many {item}s.",
    "divide": "{name} splits the {item}s into {b} equal piles and keeps one pile.",
}
STEP_PATTERN = re.compile(
    r"finds (\d+) more|gives away (\d+) |with (\d+) times as many|into (\d+) equal piles"
)
START_PATTERN = re.compile(r"^(\w+) has (\d+) \w+s\. ")
LIMIT = 10**12  # a calculator's display: results beyond it are an error, never a 5,000-digit number
# The longest JSON of a number the tools return or take: a float's shortest repr has at most 17 significant digits,
# with a sign, a point and an exponent (`-1.2345678901234567e-100`).
NUMBER = "-1.2345678901234567e-100"


def _operand(value: object) -> int | float:
    """A tool argument as a number: bools and strings are refused (`"3" * 2` must not be `"33"`)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {type(value).__name__} {value!r}")
    return value


def _result(value: int | float) -> int | float:
    """A tool's result: whole floats as ints (`6.0` reads `6`), refused beyond the display."""
    if not abs(value) <= LIMIT:  # also refuses nan and inf
        raise OverflowError(f"result {value} is beyond the calculator's range of +-{LIMIT}")
    return int(value) if isinstance(value, float) and value.is_integer() else value


def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first number
        b: the number added to it
    """
    return _result(_operand(a) + _operand(b))


def subtract(a: float, b: float) -> float:
    """Subtract one number from another.

    Args:
        a: the number subtracted from
        b: the number subtracted
    """
    return _result(_operand(a) - _operand(b))


def multiply(a: float, b: float) -> float:
    """Multiply two numbers.

    Args:
        a: the first number
        b: the second number
    """
    return _result(_operand(a) * _operand(b))


def divide(a: float, b: float) -> float:
    """Divide one number by another.

    Args:
        a: the dividend
        b: the divisor (not zero)
    """
    return _result(_operand(a) / _operand(b))


TOOLS = {f.__name__: f for f in (add, subtract, multiply, divide)}


def make_problem(seed: int, stratum: int) -> tuple[str, int]:
    """A word problem from the seed with stratum+1 operations on whole numbers, and its answer."""
    rng = random.Random(f"calculator:{seed}")
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    value = rng.randint(5, 20 * (stratum + 1))
    sentences = [f"{name} has {value} {item}s."]
    for _ in range(stratum + 1):
        divisors = [d for d in range(2, 10) if value % d == 0]
        ops = ["add", "multiply"] + (["subtract"] if value > 1 else []) + (["divide"] if divisors else [])
        op = rng.choice(ops)
        if op == "add":
            b = rng.randint(2, 20)
        elif op == "subtract":
            b = rng.randint(1, value - 1)
        elif op == "multiply":
            b = rng.randint(2, 5)
        else:
            b = rng.choice(divisors)
        value = TOOLS[op](value, b)
        sentences.append(STEPS[op].format(name=name, b=b, item=item))
    sentences.append(f"How many {item}s does {name} have now?")
    return " ".join(sentences), value


def solution(problem: str) -> tuple[int, list[tuple[str, int]]]:
    """The starting number and the (tool, operand) steps of a problem as `make_problem` writes it."""
    start = START_PATTERN.match(problem)
    if start is None:
        raise UnplayableRequest("the first user message is not a word problem of this environment")
    steps = []
    for match in STEP_PATTERN.finditer(problem):
        index = next(i for i, g in enumerate(match.groups()) if g is not None)
        steps.append((tuple(STEPS)[index], int(match.group(index + 1))))
    return int(start.group(2)), steps


def tool_call(name: str, a: int | float, b: int | float) -> str:
    """The text of one tool call, as the env's protocol reads it."""
    return f"<tool_call>{json.dumps({'name': name, 'arguments': {'a': a, 'b': b}})}</tool_call>"


def correct(completion: list, answer: int, parser: XMLParser) -> float:
    """1 when the final reply's answer is exactly the problem's."""
    return float(parse_integer(parser.parse_answer(completion)) == answer)


def answer_format(completion: list, parser: XMLParser) -> float:
    """1 when the final reply is a well-formed answer (the tool-call turns before it are not answers)."""
    return float(parser.is_well_formed(last_assistant_content(completion)))


def tool_calls(state: dict) -> float:
    """Tool calls made in the episode."""
    return float(state.get("tool_calls", 0))


def tool_errors(state: dict) -> float:
    """Tool calls that failed (bad JSON, unknown tool, bad arguments, division by zero)."""
    return float(state.get("tool_errors", 0))


class CalculatorTeacher:
    """The scripted teacher: one tool call per operation, then the answer. With probability `slip` it misreads
    one operand (off by one), drawn from (seed, problem), so its replies repeat."""

    scripted = True

    def __init__(self, slip: float = 0.0, seed: int = 0):
        self.slip, self.seed = slip, seed

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        """The next tool call, or the answer once every operation has a result."""
        return [Reply(self.reply(c)) for c in conversations]

    def reply(self, conversation: Conversation) -> str:
        """The next message of this teacher in one conversation."""
        last = conversation[-1] if conversation else None
        if not isinstance(last, dict) or last.get("role") not in ("user", "tool"):
            raise UnplayableRequest("the last message is neither the user's nor a tool result")
        problem = next((m.get("content") for m in conversation if m.get("role") == "user"), None)
        value, steps = solution(problem if isinstance(problem, str) else "")
        rng = random.Random(f"{self.seed}:{problem}")
        if steps and rng.random() < self.slip:
            misread = rng.randrange(len(steps))
            steps[misread] = (steps[misread][0], steps[misread][1] + 1)
        done = sum(m.get("role") == "tool" for m in conversation)
        if done:
            try:
                value = json.loads(last["content"]) if last.get("role") == "tool" else None
            except (TypeError, ValueError):
                value = None
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise UnplayableRequest("the last tool result is not a number")
        if done < len(steps):
            return tool_call(steps[done][0], value, steps[done][1])
        return f"<answer>{value}</answer>"


class CalculatorEnv(SeededSplits, ToolEnv):
    """Word problems solved with calculator tools; strata are numbers of operations."""

    teacher_skill = 0.2  # the embedded teacher misreads a number in a fifth of the problems
    # What the agent may not see: the problem's answer (the rubric's `answer`); the tool counts in the state are its own.
    private_spec_keys = frozenset({"answer"})
    private_state_keys = frozenset()

    def __init__(
        self,
        num_train: int,
        num_eval: int,
        num_test: int,
        seed: int,
        num_groups: int,
        specs_dir: str | None,
        max_turns: int,
    ):
        parser = XMLParser(("answer",), answer_field="answer")
        rubric = Rubric(parser=parser)
        rubric.add(correct, 1.0)
        rubric.add(answer_format, 0.0, name="format")
        rubric.add(tool_calls, 0.0)
        rubric.add(tool_errors, 0.0)
        super().__init__(
            tools=list(TOOLS.values()),
            rubric=rubric,
            parser=parser,
            system_prompt=SYSTEM_PROMPT,
            max_turns=max_turns,
            name="calculator",
        )
        self.init_splits(num_train, num_eval, num_test, seed, num_groups, specs_dir)

    def reply_tokens(self) -> int:
        """The teacher's longest possible reply: a call of the longest-named tool on two of the longest numbers (a
        misread operand makes floats), or an answer, for any tokenizer."""
        call = max((tool_call(name, 0, 0) for name in TOOLS), key=len).replace("0", NUMBER)
        return text_tokens(max(call, f"<answer>{NUMBER}</answer>", key=len))

    def completion_tokens(self) -> int:
        """The teacher's longest episode: a call per operation of the hardest stratum and the answer, each at the
        reply budget, and between turns a number (a tool's result) in its chat template frame."""
        turns = min(self.max_turns, self.num_groups + 1)
        return turns * self.reply_tokens() + (turns - 1) * (text_tokens(NUMBER) + FRAME_TOKENS)

    def spec_fields(self, seed: int, stratum: int) -> dict:
        """The problem of a seed in a stratum and its answer."""
        problem, answer = make_problem(seed, stratum)
        return {"problem": problem, "answer": answer}

    def initial_messages(self, spec: dict, state: dict) -> list[Message]:
        """The instruction with the tools, then the problem."""
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": spec["problem"]},
        ]

    def corpus(self) -> Iterator[str]:
        """The instruction (repeated: a tokenizer learns it as few tokens), problems, tool calls and answers."""
        yield from [self.system_prompt] * 100
        for split in SPLIT_SEEDS:
            for row in self.get_dataset(split):
                yield row["problem"]
                value, steps = solution(row["problem"])
                for name, b in steps:
                    yield tool_call(name, value, b)
                    value = TOOLS[name](value, b)
                    yield json.dumps(value)
                yield f"<answer>{value}</answer>"

    def evaluation_suite(self) -> EvaluationSuite:
        """The rubric means per stratum and split (the shares in [0, 1], the counts >= 0); fewer failed tool calls are
        better."""
        suite = super().evaluation_suite().lower_is_better("tool_errors")
        return suite.bounded(0.0, math.inf, "tool_errors").bounded(0.0, 1.0, "reward", "correct", "format")

    def curation_defaults(self) -> dict:
        """Exact answers only: the teacher's misreadings are what curation removes."""
        return {"allowed_outcomes": [], "min_values": {"correct": 1.0}}

    def teacher_policy(self, skill: float, seed: int) -> Policy:
        """The tool-calling teacher with slip rate `skill`."""
        return CalculatorTeacher(skill, seed)


def load_environment(
    num_train: int = 2000,
    num_eval: int = 200,
    num_test: int = 200,
    seed: int = 0,
    num_groups: int = 3,
    specs_dir: str | None = None,
    max_turns: int = 6,
) -> CalculatorEnv:
    """The calculator env: split sizes, split seed, operation-count strata, generated specs, turn limit."""
    if max_turns < num_groups + 1:
        raise ValueError(f"max_turns {max_turns} leaves no turn for the answer after {num_groups} tool calls")
    return CalculatorEnv(num_train, num_eval, num_test, seed, num_groups, specs_dir, max_turns)
