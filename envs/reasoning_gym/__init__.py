"""reasoning-gym's tasks (106 procedural families: arithmetic, strings, counting, sorting, puzzles, logic...) as a
wander env, single turn: a task's own generator makes the episodes from their seeds, its own `score_answer` scores
the reply's `<answer>`, its own curriculum levels are the difficulty strata. `tasks` names one task or a weighted
mix; each episode's task is drawn by weight from its seed. `load_environment(**kwargs)`: its keyword defaults are
the env's config.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Iterator, Mapping

from envs.reasoning_gym.tasks import draw_task, levels, make_entry, parse_mix, score
from wander.core.environment import SingleTurnEnv
from wander.core.evaluation_suite import EvaluationSuite
from wander.core.parser import XMLParser
from wander.core.pipeline_hooks import text_tokens
from wander.core.policy import Conversation, Policy, Reply, UnplayableRequest
from wander.core.rubric import Rubric
from wander.core.splits import SPLIT_SEEDS, SeededSplits

SYSTEM_PROMPT = (
    "Solve the task. Give your final answer inside <answer></answer>, exactly in the form it asks for."
)
MAX_DRAWS = 20  # seeds drawn per spec a split needs before a task's questions count as too few
FORMAT_WEIGHT = 0.1  # the reply's `<answer>` tag: a small signal a model that does not answer yet can climb


def correct(completion: list, info: dict, parser: XMLParser) -> float:
    """reasoning-gym's own score of the reply's answer (0 without the tag)."""
    answer = parser.parse_answer(completion)
    if answer is None:
        return 0.0
    entry = {
        "question": info["question"],
        "answer": json.loads(info["answer"]),
        "metadata": info["task_metadata"],
    }
    return score(info["task"], int(info["level"]), answer.strip(), entry)


class ReasoningTeacher:
    """The scripted teacher: the task's reference answer, or on a share `slip` of the questions (drawn from (seed,
    question)) the reference of the next seed's entry, a plausible wrong answer that curation's scorer removes."""

    scripted = True

    def __init__(self, env: ReasoningGymEnv, slip: float = 0.0, seed: int = 0):
        self.env, self.slip, self.seed = env, slip, seed

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        """One `<answer>` per conversation."""
        return [Reply(f"<answer>{self._answer(conversation)}</answer>") for conversation in conversations]

    def _answer(self, conversation: Conversation) -> str:
        last = conversation[-1] if conversation else {}
        question = last.get("content") if isinstance(last, dict) and last.get("role") == "user" else None
        spec = self.env.spec_of(question) if isinstance(question, str) else None
        if spec is None:
            raise UnplayableRequest("the last message is not a question of this env's splits")
        answer = json.loads(spec["answer"])
        if answer is None:
            raise UnplayableRequest(
                f"reasoning-gym gives no reference answer for {spec['task']!r} (its scorer checks a reply); "
                "set synthesize.teacher_url to a real endpoint"
            )
        if random.Random(f"{self.seed}:{question}").random() < self.slip:
            wrong = make_entry(spec["task"], int(spec["stratum"]), int(spec["seed"]) + 1)["answer"]
            if wrong is not None and wrong != answer:
                return str(wrong)
        return str(answer)


class ReasoningGymEnv(SeededSplits, SingleTurnEnv):
    """One reasoning-gym task or a weighted mix; strata are the tasks' curriculum levels."""

    teacher_skill = 0.2  # the embedded teacher slips on a fifth of the questions: competent, not perfect
    # The reference answer and the generator's metadata stay private: `wander env serve` never sends them.
    private_spec_keys = frozenset({"answer", "task_metadata"})
    private_state_keys = frozenset()

    def __init__(
        self,
        tasks: str | list | Mapping,
        num_train: int,
        num_eval: int,
        num_test: int,
        seed: int,
        num_groups: int,
        specs_dir: str | None,
    ):
        self.mix = parse_mix(tasks)
        parser = XMLParser(("answer",), answer_field="answer")
        rubric = Rubric(parser=parser)
        rubric.add(correct, 1.0 - FORMAT_WEIGHT)
        rubric.add(parser.format_reward, FORMAT_WEIGHT, name="format")
        super().__init__(rubric=rubric, parser=parser, system_prompt=SYSTEM_PROMPT, name="reasoning_gym")
        self.init_splits(num_train, num_eval, num_test, seed, num_groups, specs_dir)

    def spec_fields(self, seed: int, stratum: int) -> dict:
        """The task drawn for the seed and its entry at the stratum's level (the task's last where it has fewer)."""
        task = draw_task(self.mix, seed)
        entry = make_entry(task, stratum, seed)
        return {
            "task": task,
            "level": min(stratum, levels(task) - 1),
            "question": entry["question"],
            "answer": json.dumps(entry["answer"]),
            "task_metadata": json.dumps(entry["metadata"], default=str),
        }

    def split_specs(self, split: str) -> list[dict]:
        """Seeded specs as `SeededSplits` draws them, each question once: none of a split repeats within it or
        appears in a split held out before it (test, then eval, then train), so no evaluated question is trained on.
        """
        if self.specs_dir is not None:
            return super().split_specs(split)
        order = ("test", "eval", "train")
        taken = {row["question"] for held in order[: order.index(split)] for row in self.get_dataset(held)}
        low, high = SPLIT_SEEDS[split]
        size, rng, specs = self.sizes[split], random.Random(f"{self.seed}:{split}"), []
        for _ in range(MAX_DRAWS * size):
            if len(specs) == size:
                break
            spec = self.make_spec(rng.randrange(low, high), len(specs) % self.num_groups)
            if spec["question"] not in taken:
                taken.add(spec["question"])
                specs.append(spec)
        if len(specs) < size:
            raise ValueError(
                f"reasoning_gym: {self.mix} gives {len(specs)} distinct questions for the {split} split in "
                f"{MAX_DRAWS * size} draws, fewer than its {size}; lower the split sizes or mix in more tasks"
            )
        return specs

    def initial_messages(self, spec: dict, state: dict) -> list[dict]:
        """The instruction, then the task's question as reasoning-gym writes it."""
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": spec["question"]}]

    @functools.cached_property
    def _questions(self) -> dict[str, dict]:
        return {row["question"]: row for split in SPLIT_SEEDS for row in self.get_dataset(split)}

    def spec_of(self, question: str) -> dict | None:
        """The spec of the splits that asks `question`, or None."""
        return self._questions.get(question)

    def reply_tokens(self) -> int:
        """The longest reference answer of the splits in its tags, for any tokenizer, with room for the end."""
        longest = max(
            (json.loads(q["answer"]) or "" for q in self._questions.values()), key=lambda a: len(str(a))
        )
        return text_tokens(f"<answer>{longest}</answer>")

    def corpus(self) -> Iterator[str]:
        """The instruction (repeated: a tokenizer learns it as few tokens), the questions and tagged answers."""
        yield from [SYSTEM_PROMPT] * 100
        for row in self._questions.values():
            yield row["question"]
            yield f"<answer>{json.loads(row['answer'])}</answer>"

    def evaluation_suite(self) -> EvaluationSuite:
        """The rubric means per stratum and split, each a share in [0, 1]."""
        return super().evaluation_suite().bounded(0.0, 1.0)

    def curation_defaults(self) -> dict:
        """Answers the task's scorer takes as right only: the teacher's slips are what curation removes."""
        return {"allowed_outcomes": [], "min_values": {"correct": 1.0}}

    def teacher_policy(self, skill: float, seed: int) -> Policy:
        """The reference-answer teacher with slip rate `skill`."""
        return ReasoningTeacher(self, skill, seed)


def load_environment(
    tasks: str | list | Mapping = "spell_backward",
    num_train: int = 2000,
    num_eval: int = 200,
    num_test: int = 200,
    seed: int = 0,
    num_groups: int = 4,
    specs_dir: str | None = None,
) -> ReasoningGymEnv:
    """The reasoning_gym env: which tasks (a name, "a:2,b:1", a list, or a mapping name -> weight), split sizes,
    split seed, difficulty strata (curriculum levels 0..num_groups-1), and where generated specs live."""
    return ReasoningGymEnv(tasks, num_train, num_eval, num_test, seed, num_groups, specs_dir)
