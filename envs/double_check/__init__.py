"""Answer, then double-check (two turns): an arithmetic question, then "are you sure?", and the final answer is
scored. The environment keeps the first answer in the episode state, quotes it back in its second message and
reports whether the model kept a right answer or fixed a wrong one. Questions are made from the episode seed (no
download); the difficulty strata are expression lengths. `load_environment(**kwargs)`: its keyword defaults are
the env's config."""

from __future__ import annotations

import ast
import operator
import random
from collections.abc import Iterator

from wander.core.environment import Environment
from wander.core.evaluation_suite import EvaluationSuite
from wander.core.parser import XMLParser, last_assistant_content, parse_integer
from wander.core.pipeline_hooks import text_tokens
from wander.core.policy import Conversation, Message, Policy, Reply, UnplayableRequest
from wander.core.rubric import Rubric
from wander.core.splits import SPLIT_SEEDS, SeededSplits

SYSTEM_PROMPT = (
    "Answer the arithmetic question with a whole number inside <answer></answer>. When asked to double-check, "
    "check your work and give your final answer the same way."
)
QUESTION = "What is {}?"
FOLLOW_UP = "Are you sure? Check your work and give your final answer inside <answer></answer>."
OPERATIONS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}
ANSWER = XMLParser(("answer",), answer_field="answer")


def make_question(seed: int, stratum: int) -> str:
    """An expression from the seed: stratum k has k+2 operands up to 20(k+1); products from stratum 1 on."""
    rng = random.Random(f"double_check:{seed}")
    symbols = "+-" if stratum == 0 else "+-*"
    terms = [str(rng.randint(2, 20 * (stratum + 1)))]
    for _ in range(stratum + 1):
        terms += [rng.choice(symbols), str(rng.randint(2, 20 * (stratum + 1)))]
    return " ".join(terms)


def largest_value(num_groups: int) -> int:
    """A bound on the magnitude of any value `make_question` asks in `num_groups` strata: every operand of the
    hardest stratum at its largest, all multiplied (sums and differences stay below)."""
    stratum = num_groups - 1
    return (20 * (stratum + 1)) ** (stratum + 2)


def evaluate_expression(expression: str) -> int:
    """The value of an expression of whole numbers, +, - and * (Python precedence); ValueError otherwise."""
    try:
        tree = ast.parse(expression, mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from exc

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATIONS:
            return OPERATIONS[type(node.op)](value(node.left), value(node.right))
        raise ValueError(f"only whole numbers, +, - and * are allowed: {expression!r}")

    return value(tree)


def follow_up(answer: int | None) -> str:
    """The environment's second message: the first answer quoted back (read from the state), then the doubt."""
    said = f"You answered {answer}." if answer is not None else "I found no whole number in your answer."
    return f"{said} {FOLLOW_UP}"


def correct(state: dict, answer: int) -> float:
    """1 when the final answer is the question's value."""
    return float(state["answers"][-1:] == [answer])


def first_correct(state: dict, answer: int) -> float:
    """1 when the first answer already was right."""
    return float(state["answers"][:1] == [answer])


def flipped(state: dict) -> float:
    """1 when the final answer differs from the first: the model changed its mind when doubted."""
    answers = state["answers"]
    return float(len(answers) == 2 and answers[0] != answers[1])


class DoubleCheckTeacher:
    """The scripted teacher: answers right except with probability `slip` (a near miss); when doubted it keeps a
    right answer and fixes a wrong one half of the time. Every draw comes from (seed, question)."""

    scripted = True

    def __init__(self, slip: float = 0.0, seed: int = 0):
        self.slip, self.seed = slip, seed

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        """One `<answer>` per conversation: a first answer, or the final one after the doubt."""
        return [Reply(f"<answer>{self.answer(c)}</answer>") for c in conversations]

    def answer(self, conversation: Conversation) -> int:
        """The number this teacher answers at this point of the conversation."""
        if (
            not conversation
            or not isinstance(conversation[-1], dict)
            or conversation[-1].get("role") != "user"
        ):
            raise UnplayableRequest("the last message is not the user's")
        question = next(
            (
                m["content"]
                for m in conversation
                if m.get("role") == "user" and isinstance(m.get("content"), str)
            ),
            "",
        )
        if not (question.startswith("What is ") and question.endswith("?")):
            raise UnplayableRequest("the first user message is not a question 'What is <expression>?'")
        try:
            truth = evaluate_expression(question[len("What is ") : -1])
        except (ValueError, RecursionError) as exc:
            raise UnplayableRequest(str(exc)) from None
        rng = random.Random(f"{self.seed}:{question}")
        first = truth + rng.choice((-10, -2, -1, 1, 2, 10)) if rng.random() < self.slip else truth
        if not any(isinstance(m, dict) and m.get("role") == "assistant" for m in conversation):
            return first
        said = parse_integer(ANSWER.parse_answer(last_assistant_content(conversation)))
        if said is None or said == truth:
            return truth  # nothing to defend, or a right answer kept
        return truth if rng.random() < 0.5 else said  # doubted, half the slips are caught


class DoubleCheckEnv(SeededSplits, Environment):
    """Two turns: the answer, then the answer after "are you sure?"; strata are expression lengths."""

    teacher_skill = 0.3  # the embedded teacher first misses 30% of questions and catches half of those
    # What the agent may not see: the question's value; the state holds only the answers the agent gave.
    private_spec_keys = frozenset({"answer"})
    private_state_keys = frozenset()

    def __init__(
        self, num_train: int, num_eval: int, num_test: int, seed: int, num_groups: int, specs_dir: str | None
    ):
        parser = XMLParser(("answer",), answer_field="answer")
        rubric = Rubric(parser=parser)
        rubric.add(correct, 1.0)
        rubric.add(first_correct, 0.0)
        rubric.add(flipped, 0.0)
        rubric.add(parser.format_reward, 0.0, name="format")
        super().__init__(
            rubric=rubric, parser=parser, system_prompt=SYSTEM_PROMPT, max_turns=2, name="double_check"
        )
        self.init_splits(num_train, num_eval, num_test, seed, num_groups, specs_dir)

    def reply_tokens(self) -> int:
        """An answer with the most digits any question can need (signed, a slip of 10 included), for any
        tokenizer."""
        return text_tokens(f"<answer>-{largest_value(self.num_groups) + 10}</answer>")

    def spec_fields(self, seed: int, stratum: int) -> dict:
        """The question of a seed in a stratum and its value (the rubric's `answer`)."""
        expression = make_question(seed, stratum)
        return {"question": QUESTION.format(expression), "answer": evaluate_expression(expression)}

    def setup_state(self, spec: dict) -> dict:
        """The answers given so far (whole numbers, None when a reply held none)."""
        return {"answers": []}

    def initial_messages(self, spec: dict, state: dict) -> list[Message]:
        """The instruction, then the question."""
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": spec["question"]}]

    def env_response(self, messages: list[Message], state: dict) -> list[Message]:
        """Record the answer; after the first, doubt it; after the second, end the episode."""
        state["answers"].append(parse_integer(self.parser.parse_answer(messages)))
        if len(state["answers"]) >= 2:
            state["done"] = True
            return []
        return [{"role": "user", "content": follow_up(state["answers"][0])}]

    def corpus(self) -> Iterator[str]:
        """The instructions (repeated: a tokenizer learns them as few tokens), questions, answers, doubts."""
        yield from [SYSTEM_PROMPT, FOLLOW_UP] * 100
        for split in SPLIT_SEEDS:
            for row in self.get_dataset(split):
                yield row["question"]
                yield f"<answer>{row['answer']}</answer>"
                yield follow_up(row["answer"])

    def evaluation_suite(self) -> EvaluationSuite:
        """The rubric means per stratum and split, each a share in [0, 1]."""
        return super().evaluation_suite().bounded(0.0, 1.0)

    def curation_defaults(self) -> dict:
        """Right both times: SFT should not learn to answer wrong first, even when the slip was then caught."""
        return {"allowed_outcomes": [], "min_values": {"correct": 1.0, "first_correct": 1.0}}

    def teacher_policy(self, skill: float, seed: int) -> Policy:
        """The double-checking teacher with slip rate `skill`."""
        return DoubleCheckTeacher(skill, seed)


def load_environment(
    num_train: int = 2000,
    num_eval: int = 200,
    num_test: int = 200,
    seed: int = 0,
    num_groups: int = 3,
    specs_dir: str | None = None,
) -> DoubleCheckEnv:
    """The double_check env: split sizes, split seed, expression-length strata, and where generated specs live."""
    return DoubleCheckEnv(num_train, num_eval, num_test, seed, num_groups, specs_dir)
