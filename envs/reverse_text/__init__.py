"""Reverse a text (single turn): the reply's `<reversed_text>` is scored by its longest common subsequence with the
exact reversal. Texts are pseudo-words made from the episode seed (no download); the difficulty strata are text
lengths. `load_environment(**kwargs)`: its keyword defaults are the env's config."""

from __future__ import annotations

import random
from collections.abc import Iterator

from wander.core.environment import SingleTurnEnv
from wander.core.evaluation_suite import EvaluationSuite
from wander.core.parser import XMLParser
from wander.core.pipeline_hooks import text_tokens
from wander.core.policy import Conversation, Policy, Reply, UnplayableRequest
from wander.core.rubric import Rubric
from wander.core.splits import SPLIT_SEEDS, SeededSplits

SYSTEM_PROMPT = "Reverse the text character by character. Answer inside <reversed_text></reversed_text>."
SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "po", "de", "gu", "fe", "zo", "ba", "xi", "qu")


def make_text(seed: int, stratum: int) -> str:
    """Pseudo-words from the seed: stratum k holds 2k+1 or 2k+2 words of one to three syllables."""
    rng = random.Random(f"reverse_text:{seed}")
    words = rng.randint(2 * stratum + 1, 2 * stratum + 2)
    return " ".join("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(words))


def longest_text(num_groups: int) -> int:
    """The most characters `make_text` writes in any of `num_groups` strata: the most words, each of the most
    syllables of the longest syllable, one space apart."""
    words, syllable = 2 * (num_groups - 1) + 2, max(len(s) for s in SYLLABLES)
    return words * 3 * syllable + words - 1


def lcs_length(a: str, b: str) -> int:
    """Length of the longest common subsequence of two strings (one row of dynamic programming)."""
    row = [0] * (len(b) + 1)
    for ch in a:
        diagonal = 0
        for j, other in enumerate(b, 1):
            diagonal, row[j] = row[j], diagonal + 1 if ch == other else max(row[j], row[j - 1])
    return row[-1]


def lcs_ratio(completion: list, info: dict, parser: XMLParser) -> float:
    """2 x LCS / (len(reply) + len(reversal)): 1 for the exact reversal, 0 with no tag."""
    got, want = parser.parse_answer(completion) or "", info["text"][::-1]
    return 2 * lcs_length(got, want) / (len(got) + len(want)) if got else 0.0


def exact(completion: list, info: dict, parser: XMLParser) -> float:
    """1 when the reply is exactly the reversal."""
    return float(parser.parse_answer(completion) == info["text"][::-1])


class ReverseTeacher:
    """The scripted teacher: reverses the latest user text, slipping (a swap or a dropped letter) with `slip`."""

    scripted = True

    def __init__(self, slip: float = 0.0, seed: int = 0):
        self.slip, self.seed = slip, seed

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        """One `<reversed_text>` per conversation; the slip is drawn from (seed, text), so replies repeat."""
        replies = []
        for conversation in conversations:
            last = conversation[-1] if conversation else {}
            text = last.get("content") if isinstance(last, dict) and last.get("role") == "user" else None
            if not isinstance(text, str) or not text:
                raise UnplayableRequest("the last message is not a user text to reverse")
            out, rng = list(text[::-1]), random.Random(f"{self.seed}:{text}")
            if rng.random() < self.slip and len(out) > 1:
                i = rng.randrange(len(out) - 1)
                if rng.random() < 0.5:
                    out[i], out[i + 1] = out[i + 1], out[i]
                else:
                    del out[i]
            replies.append(Reply(f"<reversed_text>{''.join(out)}</reversed_text>"))
        return replies


class ReverseTextEnv(SeededSplits, SingleTurnEnv):
    """Reverse the user's text; strata are text lengths, balanced round-robin in every split."""

    teacher_skill = 0.2  # the embedded teacher slips on a fifth of the texts: competent, not perfect
    # Nothing hidden: the spec holds the text the prompt shows (its reversal is computed, never stored).
    private_spec_keys = frozenset()
    private_state_keys = frozenset()

    def __init__(
        self, num_train: int, num_eval: int, num_test: int, seed: int, num_groups: int, specs_dir: str | None
    ):
        parser = XMLParser(("reversed_text",), answer_field="reversed_text")
        rubric = Rubric(parser=parser)
        rubric.add(lcs_ratio, 1.0)
        rubric.add(exact, 0.0)
        rubric.add(parser.format_reward, 0.0, name="format")
        super().__init__(rubric=rubric, parser=parser, system_prompt=SYSTEM_PROMPT, name="reverse_text")
        self.init_splits(num_train, num_eval, num_test, seed, num_groups, specs_dir)

    def reply_tokens(self) -> int:
        """The reversal of the longest text any split can hold, in its tags, for any tokenizer (texts are ASCII)."""
        return text_tokens(f"<reversed_text>{'x' * longest_text(self.num_groups)}</reversed_text>")

    def spec_fields(self, seed: int, stratum: int) -> dict:
        """The text of a seed in a stratum."""
        return {"text": make_text(seed, stratum)}

    def initial_messages(self, spec: dict, state: dict) -> list[dict]:
        """The instruction, then the text alone."""
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": spec["text"]}]

    def corpus(self) -> Iterator[str]:
        """The instruction (repeated: a tokenizer learns it as few tokens), texts and their tagged reversals."""
        yield from [SYSTEM_PROMPT] * 100
        for split in SPLIT_SEEDS:
            for row in self.get_dataset(split):
                yield row["text"]
                yield f"<reversed_text>{row['text'][::-1]}</reversed_text>"

    def evaluation_suite(self) -> EvaluationSuite:
        """The rubric means per stratum and split, each a share in [0, 1]."""
        return super().evaluation_suite().bounded(0.0, 1.0)

    def curation_defaults(self) -> dict:
        """Exact reversals only: the teacher's slips are what curation removes."""
        return {"allowed_outcomes": [], "min_values": {"exact": 1.0}}

    def teacher_policy(self, skill: float, seed: int) -> Policy:
        """The reversing teacher with slip rate `skill`."""
        return ReverseTeacher(skill, seed)


def load_environment(
    num_train: int = 2000,
    num_eval: int = 200,
    num_test: int = 200,
    seed: int = 0,
    num_groups: int = 3,
    specs_dir: str | None = None,
) -> ReverseTextEnv:
    """The reverse_text env: split sizes, split seed, length strata, and where generated specs live."""
    return ReverseTextEnv(num_train, num_eval, num_test, seed, num_groups, specs_dir)
