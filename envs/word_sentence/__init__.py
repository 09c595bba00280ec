"""Write one sentence that uses given words (single turn), scored by an LLM judge against a written rubric: no
programmatic verifier decides the reward. The words are drawn from the episode seed (no download); the difficulty
strata are how many words a sentence must hold. The judge is any policy spec (`judge`: an OpenAI-compatible URL, a
model folder) or `scripted`, the env's own stand-in that grades by the words present (the tests serve it over HTTP
as a real endpoint). `load_environment(**kwargs)`: its keyword defaults are the env's config."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

from wander.core.environment import SingleTurnEnv
from wander.core.evaluation_suite import EvaluationSuite
from wander.core.parser import XMLParser
from wander.core.pipeline_hooks import text_tokens
from wander.core.policy import Conversation, Policy, Reply, UnplayableRequest
from wander.core.rubric import Rubric
from wander.core.splits import SPLIT_SEEDS, SeededSplits
from wander.policies.judge import Judge

SYSTEM_PROMPT = "Write one sentence that uses every word the user lists. Answer inside <sentence></sentence>."
RUBRIC = "The reply is a single sentence that uses every listed word."
WORDS = (
    "river", "lamp", "violin", "garden", "window", "candle", "bridge", "letter", "mountain", "teacher", "basket",
    "engine", "forest", "pillow", "rocket", "market", "winter", "mirror", "harbor", "puzzle", "ladder", "orange",
    "castle", "blanket",
)  # fmt: skip
ASK = "Use these words: "
SENTENCE = re.compile(r"<sentence>(.*?)</sentence>", re.DOTALL)


def make_words(seed: int, stratum: int) -> list[str]:
    """Stratum k asks for k + 2 distinct words, drawn from the seed."""
    return random.Random(f"word_sentence:{seed}").sample(WORDS, stratum + 2)


def teacher_sentence(words: list[str]) -> str:
    """The teacher's sentence holding every word, in order."""
    return "The " + ", the ".join(words[:-1]) + f" and the {words[-1]} shared one quiet afternoon."


class SentenceTeacher:
    """The scripted teacher: one sentence with every word, slipping (a word left out) with `slip`."""

    scripted = True

    def __init__(self, slip: float = 0.0, seed: int = 0):
        self.slip, self.seed = slip, seed

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        """One `<sentence>` per conversation; the slip is drawn from (seed, words), so replies repeat."""
        replies = []
        for conversation in conversations:
            last = conversation[-1] if conversation else {}
            text = last.get("content") if isinstance(last, dict) and last.get("role") == "user" else ""
            if not isinstance(text, str) or not text.startswith(ASK):
                raise UnplayableRequest(f"the last message is not a user's list of words ({ASK}...)")
            words = text.removeprefix(ASK).rstrip(".").split(", ")
            rng = random.Random(f"{self.seed}:{text}")
            if rng.random() < self.slip and len(words) > 1:
                words.pop(rng.randrange(len(words)))
            replies.append(Reply(f"<sentence>{teacher_sentence(words)}</sentence>"))
        return replies


def words_grade(task: str, reply: str) -> int:
    """The scripted judge's grade of 10: the share of the task's words the reply's one sentence holds."""
    words = task.removeprefix(ASK).rstrip(".").split(", ")
    found = SENTENCE.search(reply)
    sentence = found.group(1).strip() if found else ""
    if not sentence or len(re.findall(r"[.!?](\s|$)", sentence)) != 1:
        return 0
    used = set(re.findall(r"[a-z]+", sentence.lower()))
    return round(10 * sum(w in used for w in words) / len(words))


class ScriptedJudge:
    """The env's stand-in judge: reads the judge prompt `Judge` writes and grades by `words_grade`."""

    scripted = True

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        """A `Score: N` answer per judge prompt (Yes for 10, else No, where the prompt asks Yes or No)."""
        replies = []
        for conversation in conversations:
            body, instruction = conversation[-1]["content"].rsplit(
                "\n\n", 1
            )  # the instruction: last paragraph
            task = body.split("\nTask:\n", 1)[1].split("\n", 1)[0]
            grade = words_grade(task, body.split("\nReply:\n", 1)[1])
            replies.append(
                Reply(("Yes" if grade == 10 else "No") if "Yes" in instruction else f"Score: {grade}")
            )
        return replies


class WordSentenceEnv(SeededSplits, SingleTurnEnv):
    """One sentence with the listed words, judged; strata are the number of words."""

    teacher_skill = (
        0.2  # the embedded teacher leaves a word out of a fifth of its sentences; curation drops those
    )
    private_spec_keys = frozenset()
    private_state_keys = frozenset()
    steps_block = False  # one rubric batch: the judge gets every reply of a batch in one call

    def __init__(self, judge: Judge, num_train: int, num_eval: int, num_test: int, seed: int, num_groups: int,
                 specs_dir: str | None):  # fmt: skip
        parser = XMLParser(("sentence",), answer_field="sentence")
        rubric = Rubric(parser=parser)
        rubric.add(judge, 1.0)
        rubric.add(parser.format_reward, 0.0, name="format")
        super().__init__(rubric=rubric, parser=parser, system_prompt=SYSTEM_PROMPT, name="word_sentence")
        self.judge = judge
        self.init_splits(num_train, num_eval, num_test, seed, num_groups, specs_dir)

    def reply_tokens(self) -> int:
        """Twice the teacher's sentence for the most words (room for a model's own wording), in its tags."""
        longest = sorted(WORDS, key=len)[-(self.num_groups + 1) :]
        return 2 * text_tokens(f"<sentence>{teacher_sentence(longest)}</sentence>")

    def spec_fields(self, seed: int, stratum: int) -> dict:
        """The words of a seed in a stratum, comma-separated."""
        return {"words": ", ".join(make_words(seed, stratum))}

    def initial_messages(self, spec: dict, state: dict) -> list[dict]:
        """The instruction, then the words."""
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": ASK + spec["words"]},
        ]

    def corpus(self) -> Iterator[str]:
        """The instruction (repeated: a tokenizer learns it as few tokens), the asks and the teacher's sentences."""
        yield from [SYSTEM_PROMPT] * 100
        for split in SPLIT_SEEDS:
            for row in self.get_dataset(split):
                yield ASK + row["words"]
                yield f"<sentence>{teacher_sentence(row['words'].split(', '))}</sentence>"

    def evaluation_suite(self) -> EvaluationSuite:
        """The rubric means per stratum and split, each a share in [0, 1]."""
        return super().evaluation_suite().bounded(0.0, 1.0)

    def curation_defaults(self) -> dict:
        """Sentences the judge gives full marks only: the teacher's slips are what curation removes."""
        return {"allowed_outcomes": [], "min_values": {"judge": 1.0}}

    def teacher_policy(self, skill: float, seed: int) -> Policy:
        """The sentence-writing teacher with slip rate `skill`."""
        return SentenceTeacher(skill, seed)


def load_environment(
    judge: str = "scripted",
    judge_max_calls: int = 100_000,
    judge_mode: str = "each",
    judge_verdict: str = "score",
    num_train: int = 2000,
    num_eval: int = 200,
    num_test: int = 200,
    seed: int = 0,
    num_groups: int = 4,
    specs_dir: str | None = None,
) -> WordSentenceEnv:
    """The word_sentence env: its judge (a policy spec, or `scripted`) with its request budget, mode (`each` or
    `group`) and verdict (`score` 0-10 or `yes_no`), split sizes, split seed, word-count strata, and where
    generated specs live."""
    options = {"mode": judge_mode, "verdict": judge_verdict, "max_calls": judge_max_calls, "reference": None}
    grader = (
        Judge(ScriptedJudge(), RUBRIC, **options)
        if judge == "scripted"
        else Judge.from_spec(judge, RUBRIC, **options)
    )
    return WordSentenceEnv(grader, num_train, num_eval, num_test, seed, num_groups, specs_dir)
