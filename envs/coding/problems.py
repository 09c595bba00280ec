"""Generated Python programming problems: a function to write, its reference, a slip's version, hidden tests.

Every problem comes from a family (a template with one fixed function name) whose constants are drawn from the
seed, so a model must read the prompt to know which constant, letter or comparison it asks for; the names stay
fixed so a small model can learn them. Stratum 0 asks for one expression, 1 for one loop, 2 for a loop with a
condition or state, 3 for two steps. The buggy solution is the reference with one plausible slip (a `>=` for
a `>`, an off-by-one range, a forgotten reset); its choice depends on the prompt alone, so `read_problem`
rebuilds the same one from the text the teacher sees. Expected values come from running the reference here
(our own code), and each problem's tests hold at least one input on which the slip fails.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

MAX_STRATA = 4
MIN_TESTS, MAX_TESTS = 5, 8
PREFIX = "Write a Python function `"
# Small words of every length 1..6, so each word-length constant has words at, below and above it.
# fmt: off
VOCAB = (
    "a", "an", "ox", "cat", "dog", "sun", "egg", "owl", "ice", "tree", "bird", "lamp", "kite", "moon", "pear",
    "rope", "apple", "house", "river", "melon", "zebra", "garden", "yellow", "banana", "orange",
)
# fmt: on
# Letters some word starts with and another holds further in: both slips of count_initial can show.
INITIALS = tuple(sorted({w[0] for w in VOCAB} & {ch for w in VOCAB for ch in w[1:]}))
ALPHABET = "abcdefghijklmnopqrstuvwxyz"
LETTER_SETS = tuple("".join(c) for c in itertools.combinations("aeilnorstu", 3))


@dataclass(frozen=True)
class Problem:
    """One problem: what the model reads, the reference, a slip's version, and the hidden tests."""

    family: str
    entry_point: str
    prompt: str
    reference: str
    buggy: str
    tests: tuple[tuple[tuple, object], ...]


@dataclass(frozen=True)
class Family:
    """A problem template: its constants' domains, its sentence, its reference body and its slips."""

    name: str
    stratum: int
    signature: str  # after the function's name: "(xs: list[int]) -> int"
    sentence: str  # str.format template over the constants
    body: str  # the reference body, a str.format template (4-space indents)
    bugs: tuple[tuple[str, str], ...]  # (old, new) templates: each replaces one span of the formatted body
    domains: tuple[tuple[str, tuple], ...]
    draw: Callable[[random.Random, dict], tuple]  # one test's arguments
    # Boundary arguments, tried in order when every drawn test misses the slip.
    edges: Callable[[dict], list[tuple]]

    def prompt(self, params: dict) -> str:
        """The task's text for these constants."""
        return f"{PREFIX}{self.name}{self.signature}` that {self.sentence.format(**params)}"

    def pattern(self) -> re.Pattern:
        """A regex reading the constants back out of a prompt."""
        kinds = {name: r"-?\d+" if isinstance(domain[0], int) else "[a-z]+" for name, domain in self.domains}
        parts = re.split(r"\{(\w+)\}", self.sentence)
        sentence = "".join(
            f"(?P<{part}>{kinds[part]})" if i % 2 else re.escape(part) for i, part in enumerate(parts)
        )
        return re.compile(re.escape(f"{PREFIX}{self.name}{self.signature}` that ") + sentence)


def _ints(rng: random.Random, lo: int, hi: int, longest: int = 8) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(rng.randint(0, longest))]


def _letters(rng: random.Random, alphabet: str, longest: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, longest)))


def _longer(k: int) -> list[str]:
    return [w for w in VOCAB if len(w) > k]


def _with(rng: random.Random, xs: list[int], x: int) -> list[int]:
    """xs with x put in half the time: the boundary value is where comparison slips show."""
    if len(xs) < 8 and rng.random() < 0.5:
        xs.insert(rng.randint(0, len(xs)), x)
    return xs


# fmt: off
FAMILIES: tuple[Family, ...] = (
    Family(
        "affine", 0, "(x: int) -> int", "returns x * {A} + {B}.",
        "    return x * {A} + {B}\n",
        (("x * {A} + {B}", "x * {A} - {B}"), ("x * {A} + {B}", "(x + {B}) * {A}")),
        (("A", tuple(range(2, 10))), ("B", tuple(range(1, 21)))),
        lambda rng, p: (rng.randint(-20, 20),),
        lambda p: [(0,), (1,)],
    ),
    Family(
        "is_multiple", 0, "(n: int) -> bool", "returns True when n is divisible by {K} and False otherwise.",
        "    return n % {K} == 0\n",
        (("n % {K}", "n // {K}"), ("n % {K}", "{K} % n")),
        (("K", tuple(range(2, 10))),),
        lambda rng, p: (rng.choice([rng.randint(-20, 20), p["K"] * rng.randint(-3, 3)]),),
        lambda p: [(p["K"],), (2 * p["K"],), (1,)],
    ),
    Family(
        "repeat_text", 0, "(s: str) -> str", "returns s repeated {K} times, with nothing between the copies.",
        "    return s * {K}\n",
        (("s * {K}", "s * ({K} - 1)"), ("s * {K}", "' '.join([s] * {K})")),
        (("K", tuple(range(2, 7))),),
        lambda rng, p: (rng.choice(("",) + VOCAB),),
        lambda p: [("ab",)],
    ),
    Family(
        "last_chars", 0, "(s: str) -> str",
        "returns the last {K} characters of s (all of s when it is shorter).",
        "    return s[-{K}:]\n",
        (("s[-{K}:]", "s[{K}:]"), ("s[-{K}:]", "s[:{K}]")),
        (("K", tuple(range(1, 6))),),
        lambda rng, p: (_letters(rng, "abcdefghijklmnop", 8),),
        lambda p: [("abcdefgh",), ("ab",)],
    ),
    Family(
        "sum_above", 1, "(xs: list[int]) -> int",
        "returns the sum of the numbers in xs that are greater than {K}.",
        "    return sum(x for x in xs if x > {K})\n",
        ((" > ", " >= "), ("sum(x for", "sum(1 for")),
        # Not 0: a `>=` slip adds nothing when the boundary number is 0.
        (("K", tuple(k for k in range(-9, 16) if k)),),
        lambda rng, p: (_with(rng, _ints(rng, -20, 20), p["K"]),),
        lambda p: [([p["K"], p["K"] + 2],), ([p["K"] + 2, p["K"] + 3],)],
    ),
    Family(
        "count_initial", 1, "(words: list[str]) -> int",
        "returns how many of the words start with the letter {C}.",
        "    return sum(1 for w in words if w.startswith({C!r}))\n",
        (("w.startswith({C!r})", "{C!r} in w"), ("w.startswith({C!r})", "w.endswith({C!r})")),
        (("C", INITIALS),),
        lambda rng, p: (
            rng.choices([w for w in VOCAB if p["C"] in w] * 2 + list(VOCAB), k=rng.randint(0, 6)),
        ),
        lambda p: [([w],) for w in VOCAB if p["C"] in w],
    ),
    Family(
        "scale", 1, "(xs: list[int]) -> list[int]",
        "returns the numbers of xs, each multiplied by {K}, as a list in the same order.",
        "    return [x * {K} for x in xs]\n",
        (
            ("x * {K} for x in xs", "xs[i] * {K} for i in range(len(xs) - 1)"),
            ("for x in xs", "for x in xs if x > 0"),
        ),
        (("K", (-5, -4, -3, -2, 2, 3, 4, 5, 6, 7, 8, 9, 10)),),
        lambda rng, p: (_ints(rng, -20, 20, 6),),
        lambda p: [([1, 2],), ([-1, 0, 3],)],
    ),
    Family(
        "count_char", 1, "(s: str) -> int", "returns how many times the character {C} occurs in s.",
        "    n = 0\n    for ch in s:\n        if ch == {C!r}:\n            n += 1\n    return n\n",
        (("for ch in s:", "for ch in s[1:]:"), ("for ch in s:", "for ch in s[:-1]:")),
        (("C", tuple(ALPHABET)),),
        # Its letter is as likely as the three others together: counts of 0 stay rare.
        lambda rng, p: (_letters(rng, p["C"] * 3 + "".join(rng.sample(ALPHABET, 3)), 10),),
        lambda p: [(p["C"] + "xy" + p["C"],)],
    ),
    Family(
        "first_above", 2, "(xs: list[int]) -> int",
        "returns the index of the first number in xs that is greater than {K}, or -1 when there is none.",
        "    for i, x in enumerate(xs):\n        if x > {K}:\n            return i\n    return -1\n",
        ((" > ", " >= "), ("return i\n", "return x\n"), ("return -1", "return len(xs)")),
        (("K", tuple(range(-5, 16))),),
        lambda rng, p: (_with(rng, _ints(rng, p["K"] - 8, p["K"] + 4), p["K"]),),
        lambda p: [([],), ([p["K"], p["K"] + 1],), ([p["K"] + 1],), ([p["K"] - 1, p["K"] + 1],)],
    ),
    Family(
        "long_words", 2, "(s: str) -> str",
        "returns the words of s (s separates them by single spaces) that are longer than {K} letters, "
        "in order, joined by single spaces.",
        "    return ' '.join(w for w in s.split() if len(w) > {K})\n",
        ((" > ", " >= "), ("' '.join", "''.join")),
        (("K", (2, 3, 4, 5)),),
        lambda rng, p: (" ".join(rng.choices(VOCAB, k=rng.randint(0, 6))),),
        # A word of exactly K letters (a `>=` keeps it) and two longer ones (a wrong separator shows).
        lambda p: [(" ".join([w for w in VOCAB if len(w) == p["K"]][:1] + _longer(p["K"])[:2]),)],
    ),
    Family(
        "count_among", 2, "(s: str) -> int",
        'returns how many characters of s are one of the letters in "{L}".',
        "    n = 0\n    for ch in s:\n        if ch in {L!r}:\n            n += 1\n    return n\n",
        (
            ("for ch in s:", "for ch in set(s):"),
            ("for ch in s:\n        if ch in {L!r}:", "for ch in {L!r}:\n        if ch in s:"),
        ),
        (("L", LETTER_SETS),),
        lambda rng, p: (" ".join(rng.sample(VOCAB, rng.randint(0, 4))),),
        lambda p: [(p["L"][0] * 2 + p["L"][1],)],
    ),
    Family(
        "longest_streak", 2, "(xs: list[int]) -> int",
        "returns the length of the longest run of adjacent numbers in xs that are all greater than {K} "
        "(0 when there is none).",
        "    best = 0\n    run = 0\n    for x in xs:\n        if x > {K}:\n            run += 1\n"
        "            best = max(best, run)\n        else:\n            run = 0\n    return best\n",
        ((" > ", " >= "), ("        else:\n            run = 0\n", "")),
        (("K", tuple(range(-5, 11))),),
        lambda rng, p: (_ints(rng, p["K"] - 3, p["K"] + 3),),
        lambda p: [([p["K"] + 1, p["K"], p["K"] + 1],), ([p["K"], p["K"]],)],
    ),
    Family(
        "even_squares_mod", 3, "(xs: list[int]) -> int",
        "returns the sum of the squares of the even numbers in xs, modulo {K}.",
        "    return sum(x * x for x in xs if x % 2 == 0) % {K}\n",
        (("x % 2 == 0", "x % 2 == 1"), (") % {K}", ")")),
        (("K", tuple(range(3, 31))),),
        lambda rng, p: (_ints(rng, -10, 10),),
        lambda p: [([2, 1],), ([20],), ([3],)],
    ),
    Family(
        "drop_every", 3, "(s: str) -> str",
        "returns s without the characters whose position, counting from 1, is a multiple of {K}.",
        "    return ''.join(ch for i, ch in enumerate(s) if (i + 1) % {K} != 0)\n",
        (("(i + 1) % {K}", "i % {K}"), ("!= 0", "== 0")),
        (("K", tuple(range(2, 8))),),
        lambda rng, p: (_letters(rng, "abcdefghijklmnop", 12),),
        lambda p: [("abcdefghijkl",)],
    ),
    Family(
        "running_max", 3, "(xs: list[int]) -> list[int]",
        "returns a list whose item i is the largest of {K} and the numbers xs[0] to xs[i].",
        "    best = {K}\n    out = []\n    for x in xs:\n"
        "        best = max(best, x)\n        out.append(best)\n    return out\n",
        (
            (
                "best = max(best, x)\n        out.append(best)",
                "out.append(best)\n        best = max(best, x)",
            ),
            ("max(best, x)", "max({K}, x)"),
        ),
        (("K", tuple(range(-10, 16))),),
        lambda rng, p: (_ints(rng, p["K"] - 8, p["K"] + 8),),
        lambda p: [([p["K"] + 1],), ([p["K"] + 5, p["K"] + 1],)],
    ),
    Family(
        "frequent", 3, "(xs: list[int]) -> list[int]",
        "returns the numbers that appear at least {K} times in xs, each once, "
        "in the order of their first appearance.",
        "    out = []\n    for x in xs:\n"
        "        if xs.count(x) >= {K} and x not in out:\n            out.append(x)\n    return out\n",
        ((" >= ", " > "), (" and x not in out", "")),
        (("K", (2, 3, 4)),),
        # Three values at most: repeats, hence answers other than [], are common.
        lambda rng, p: (rng.choices(rng.sample(range(-3, 10), 3), k=rng.randint(0, 8)),),
        lambda p: [([5] * p["K"],)],
    ),
)
# fmt: on
STRATA: tuple[tuple[Family, ...], ...] = tuple(
    tuple(f for f in FAMILIES if f.stratum == k) for k in range(MAX_STRATA)
)
_PATTERNS = {f.name: f.pattern() for f in FAMILIES}


def call_text(entry_point: str, args: tuple) -> str:
    """How a test call reads in feedback, e.g. `sum_above([1, 9])`."""
    return f"{entry_point}({', '.join(repr(a) for a in args)})"


@functools.lru_cache(maxsize=4096)
def _function(source: str, entry_point: str) -> Callable:
    namespace: dict = {}
    exec(source, namespace)  # our own reference or slip, never the model's code
    return namespace[entry_point]


def _result(source: str, entry_point: str, args: tuple) -> str | None:
    """The call's value as JSON (so True and 1 differ), or None when it raises."""
    try:
        return json.dumps(_function(source, entry_point)(*copy.deepcopy(args)))
    except Exception:
        return None


def _build(family: Family, params: dict) -> tuple[str, str, str]:
    """The prompt, the reference and the buggy solution for these constants, all from the prompt alone."""
    prompt = family.prompt(params)
    header = f"def {family.name}{family.signature}:\n"
    body = family.body.format(**params)
    old, new = random.Random(f"coding:bug:{prompt}").choice(family.bugs)
    old, new = old.format(**params), new.format(**params)
    if body.count(old) != 1:
        raise RuntimeError(f"{family.name}: the slip {old!r} must occur once in the reference")
    return prompt, header + body, header + body.replace(old, new)


def make_problem(seed: int, stratum: int) -> Problem:
    """The problem of this seed in this difficulty stratum (0..MAX_STRATA-1)."""
    if not 0 <= stratum < MAX_STRATA:
        raise ValueError(f"stratum {stratum} is outside 0..{MAX_STRATA - 1}")
    rng = random.Random(f"coding:problem:{stratum}:{seed}")
    family = rng.choice(STRATA[stratum])
    params = {name: rng.choice(domain) for name, domain in family.domains}
    prompt, reference, buggy = _build(family, params)
    inputs: list[tuple] = []
    want = rng.randint(MIN_TESTS, MAX_TESTS)
    # Distinct inputs where the draws allow; a tiny domain (repeat_text's words) may need a few redraws.
    for _ in range(20 * MAX_TESTS):
        args = family.draw(rng, params)
        if args not in inputs:
            inputs.append(args)
        if len(inputs) == want:
            break

    def fails(args: tuple) -> bool:
        return _result(buggy, family.name, args) != _result(reference, family.name, args)

    if not any(fails(args) for args in inputs):
        edge = next((args for args in family.edges(params) if fails(args)), None)
        if edge is None:
            raise RuntimeError(f"{family.name} {params}: no test tells the slip from the reference")
        inputs[-1] = edge
    tests = tuple((args, json.loads(_result(reference, family.name, args))) for args in inputs)
    return Problem(family.name, family.name, prompt, reference, buggy, tests)


def read_problem(prompt: str) -> Problem:
    """The problem a prompt states, rebuilt from its text alone (tests are `()`: the seed is unknown)."""
    text = prompt.strip()
    for family in FAMILIES:
        match = _PATTERNS[family.name].fullmatch(text)
        if match is None:
            continue
        params: dict = {}
        for name, domain in family.domains:
            value = match[name]
            params[name] = int(value) if isinstance(domain[0], int) else value
            if params[name] not in domain:
                break
        else:
            built, reference, buggy = _build(family, params)
            if built == text:
                return Problem(family.name, family.name, built, reference, buggy, ())
    raise ValueError(f"{prompt[:80]!r} is not a problem of this environment")
