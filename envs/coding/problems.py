"""Generated Python programming problems: a function to write, its reference, a slip's version, example tests the
model may run and hidden tests that judge it.

Every problem comes from a family (a template with one fixed function name) whose constants (numbers, letters,
and word choices such as the comparison, a separator or an order) are drawn from the seed, so a model must read
the prompt to know what it asks for; the names stay fixed so a small model can learn them. Each family states
60 to 160 distinct problems, so splits can keep their prompts apart. Stratum 0 asks for one expression, 1 for one loop, 2 for a loop with a
condition or state, 3 for two steps. The buggy solution is the reference with one plausible slip (a `>=` for
a `>`, an off-by-one range, a forgotten reset); its choice depends on the prompt alone, so `read_problem`
rebuilds the same one from the text the teacher sees. Expected values come from running the reference here
(our own code). The examples and the hidden tests are distinct inputs, and each side holds at least one on which the
slip fails: the examples show a slip to whoever runs them, and the hidden tests score it 0 when it is left unfixed.
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
MIN_TESTS, MAX_TESTS = 5, 8  # hidden tests per problem
SLIP_DRAWS = 200  # further draws for an input that shows the slip, once the boundary inputs are taken
EXAMPLE_TESTS = (
    3  # example tests per problem: what `run_tests` runs, and the only expected values a model sees
)
PREFIX = "Write a Python function `"
# Small words of every length 1..7, so each word-length constant has words at, below and above it.
# fmt: off
VOCAB = (
    "a", "an", "ox", "cat", "dog", "sun", "egg", "owl", "ice", "tree", "bird", "lamp", "kite", "moon", "pear",
    "rope", "apple", "house", "river", "melon", "zebra", "garden", "yellow", "banana", "orange", "chicken",
    "rainbow", "blanket",
)
ALPHABET = "abcdefghijklmnopqrstuvwxyz"
LETTER_SETS = tuple("".join(c) for c in itertools.combinations("aeilnorstu", 3))
# A comparison's words: its operator and the slip's (the boundary taken or left out).
CMPS = {
    "greater than": (">", ">="), "at least": (">=", ">"), "less than": ("<", "<="), "at most": ("<=", "<"),
    "more than": (">", ">="), "fewer than": ("<", "<="), "exactly": ("==", ">="),
}
COMPARE = ("greater than", "at least", "less than", "at most")
UP = ("greater than", "at least", "more than")  # the comparisons that hold for numbers above the constant
SEPARATORS = {
    "nothing": "", "a space": " ", "a comma": ",", "a dash": "-", "a dot": ".", "a colon": ":", "a slash": "/",
    "a plus sign": "+", "an underscore": "_", "a comma and a space": ", ",
}
JOINERS = {"single spaces": " ", "commas": ",", "dashes": "-", "semicolons": ";", "slashes": "/"}
# (the code, its two slips) per choice of words; {K} and {K1} (K + 1) are filled in.
SLICES = {
    "the first": ("s[:{K}]", "s[{K}:]", "s[:{K1}]"),
    "the last": ("s[-{K}:]", "s[{K}:]", "s[:{K}]"),
    "all but the first": ("s[{K}:]", "s[-{K}:]", "s[{K1}:]"),
    "all but the last": ("s[:-{K}]", "s[-{K}:]", "s[:{K}]"),
}
CHAR_TESTS = {"equal to": "==", "different from": "!=", "alphabetically before": "<", "alphabetically after": ">"}
ORDERS = {
    "in the order of their first appearance": "out", "in increasing order": "sorted(out)",
    "in decreasing order": "sorted(out, reverse=True)",
}
# Most families' slips: the code of one span (`code`) replaced by one of two slips.
SLIPS = (("{code}", "{slip1}"), ("{code}", "{slip2}"))
# fmt: on


@dataclass(frozen=True)
class Problem:
    """One problem: what the model reads, the reference, a slip's version, the hidden tests and the examples."""

    family: str
    entry_point: str
    prompt: str
    reference: str
    buggy: str
    tests: tuple[tuple[tuple, object], ...]
    examples: tuple[tuple[tuple, object], ...] = ()


@dataclass(frozen=True)
class Family:
    """A problem template: its constants' domains, its sentence, its reference body and its slips."""

    name: str
    stratum: int
    signature: str  # after the function's name: "(xs: list[int]) -> int"
    sentence: str  # str.format template over the constants (and the extra fields)
    body: str  # the reference body, a str.format template (4-space indents)
    bugs: tuple[tuple[str, str], ...]  # (old, new) templates: each replaces one span of the formatted body
    domains: tuple[tuple[str, tuple], ...]  # a constant's values: ints, or words the sentence holds
    draw: Callable[[random.Random, dict], tuple]  # one test's arguments
    # Boundary arguments, tried in order when every drawn test misses the slip.
    edges: Callable[[dict], list[tuple]]
    # Fields the constants decide (an operator, a code span, a few words), for the templates.
    extra: Callable[[dict], dict] = lambda params: {}

    def fields(self, params: dict) -> dict:
        """The constants and what they decide: every field the templates may name."""
        return {**params, **self.extra(params)}

    def prompt(self, params: dict) -> str:
        """The task's text for these constants."""
        return f"{PREFIX}{self.name}{self.signature}` that {self.sentence.format(**self.fields(params))}"

    def pattern(self) -> re.Pattern:
        """A regex reading the constants back out of a prompt (extra fields match anything: the text rebuilt
        from the constants must then equal the prompt)."""
        kinds = {  # a number, or one of the words
            name: r"-?\d+"
            if isinstance(d[0], int)
            else "|".join(re.escape(w) for w in sorted(d, key=len)[::-1])
            for name, d in self.domains
        }
        parts = re.split(r"\{(\w+)\}", self.sentence)
        sentence = "".join(
            (f"(?P<{part}>{kinds[part]})" if part in kinds else ".*?") if i % 2 else re.escape(part)
            for i, part in enumerate(parts)
        )
        return re.compile(re.escape(f"{PREFIX}{self.name}{self.signature}` that ") + sentence)


def _ints(rng: random.Random, lo: int, hi: int, longest: int = 8) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(rng.randint(0, longest))]


def _letters(rng: random.Random, alphabet: str, longest: int, shortest: int = 0) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(shortest, longest)))


def _with(rng: random.Random, xs: list[int], x: int) -> list[int]:
    """xs with x put in half the time: the boundary value is where comparison slips show."""
    if len(xs) < 8 and rng.random() < 0.5:
        xs.insert(rng.randint(0, len(xs)), x)
    return xs


def _compare(p: dict) -> dict:
    op, slip = CMPS[p["CMP"]]
    return {"op": op, "slip": slip}


def _around(p: dict, below: int, above: int) -> tuple[int, int]:
    """A range of test numbers about the constant, wider on the side the comparison does not keep."""
    return (p["K"] - below, p["K"] + above) if p["CMP"] in UP else (p["K"] - above, p["K"] + below)


def _repeat(p: dict) -> dict:
    k, sep = p["K"], repr(SEPARATORS[p["SEP"]])
    if sep == "''":
        return {"code": f"s * {k}", "slip1": f"s * ({k} - 1)", "slip2": f"' '.join([s] * {k})"}
    code = f"{sep}.join([s] * {k})"
    return {"code": code, "slip1": code.replace(f"* {k}", f"* ({k} - 1)"), "slip2": f"(s + {sep}) * {k}"}


def _slice(p: dict) -> dict:
    code, slip1, slip2 = (t.format(K=p["K"], K1=p["K"] + 1) for t in SLICES[p["V"]])
    tail = "the empty string" if p["V"].startswith("all but") else "all of s"
    return {"code": code, "slip1": slip1, "slip2": slip2, "TAIL": tail}


def _initial(p: dict) -> dict:
    c = repr(p["C"])
    test, other = f"w.startswith({c})", f"w.endswith({c})"
    if p["V"].endswith("end"):
        test, other = other, test
    if p["V"].startswith("do not"):
        return {"code": f"not {test}", "slip1": f"{c} not in w", "slip2": f"not {other}"}
    return {"code": test, "slip1": f"{c} in w", "slip2": other}


def _char_edge(p: dict) -> list[tuple]:
    """A hit, a miss and a hit: dropping the first or the last character changes the count."""
    c = p["C"]
    hit, miss = {"equal to": (c, "a"), "alphabetically after": ("z", c)}.get(p["V"], ("a", c))
    return [(hit + miss + hit,)]


def _words_edge(p: dict) -> list[tuple]:
    """Two words below K letters, one of K, two above (and the reverse order): a boundary or separator slip shows
    on them."""
    k = p["K"]
    below, at, above = ([w for w in VOCAB if f(len(w))] for f in (k.__gt__, k.__eq__, k.__lt__))
    words = (below * 2)[:2] + at[:1] + (above * 2)[:2]
    return [(" ".join(words),), (" ".join(words[::-1]),)]


def _drop(p: dict) -> dict:
    pos, other = ("(i + 1)", "i")[:: 1 if p["B"] == 1 else -1]
    eq, neq = ("!=", "==")[:: 1 if p["V"] == "without" else -1]
    return {"pos": pos, "other": other, "eq": eq, "neq": neq}


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
        "is_multiple", 0, "(n: int) -> bool", "returns True when n {W} divisible by {K} and False otherwise.",
        "    return n % {K} {op} 0\n",
        (("n % {K}", "n // {K}"), ("n % {K}", "{K} % n")),
        (("W", ("is", "is not")), ("K", tuple(range(2, 51)))),
        lambda rng, p: (rng.choice([rng.randint(-20, 20), p["K"] * rng.randint(-3, 3)]),),
        lambda p: [(p["K"],), (2 * p["K"],), (1,), (0,)],
        lambda p: {"op": "==" if p["W"] == "is" else "!="},
    ),
    Family(
        "repeat_text", 0, "(s: str) -> str", "returns s repeated {K} times, with {SEP} between the copies.",
        "    return {code}\n", SLIPS,
        (("K", tuple(range(2, 13))), ("SEP", tuple(SEPARATORS))),
        lambda rng, p: (rng.choice(("",) + VOCAB),),
        lambda p: [("ab",)],
        _repeat,
    ),
    Family(
        "last_chars", 0, "(s: str) -> str", "returns {V} {K} characters of s ({TAIL} when s is shorter).",
        "    return {code}\n", SLIPS,
        (("V", tuple(SLICES)), ("K", tuple(range(1, 21)))),
        lambda rng, p: (_letters(rng, "abcdefghijklmnop", p["K"] + 5, max(0, p["K"] - 5)),),
        lambda p: [((ALPHABET * 2)[: 2 * p["K"] + 3],), ("ab",)],
        _slice,
    ),
    Family(
        "sum_above", 1, "(xs: list[int]) -> int", "returns the sum of the numbers in xs that are {CMP} {K}.",
        "    return sum(x for x in xs if x {op} {K})\n",
        (("x {op} {K}", "x {slip} {K}"), ("sum(x for", "sum(1 for")),
        # Not 0: a boundary slip adds or drops nothing when the boundary number is 0.
        (("CMP", COMPARE), ("K", tuple(k for k in range(-15, 26) if k))),
        lambda rng, p: (_with(rng, _ints(rng, p["K"] - 15, p["K"] + 15), p["K"]),),
        lambda p: [([p["K"] + d, p["K"] + e],) for d, e in ((0, 2), (0, -2), (2, 3), (-2, -3))],
        _compare,
    ),
    Family(
        "count_initial", 1, "(words: list[str]) -> int", "returns how many of the words {V} with the letter {C}.",
        "    return sum(1 for w in words if {code})\n", SLIPS,
        (("V", ("start", "end", "do not start", "do not end")), ("C", tuple(ALPHABET))),
        # Short made-up words over its letter and two others: the letter starts, ends and sits inside them.
        lambda rng, p: (
            [_letters(rng, p["C"] * 2 + "".join(rng.sample(ALPHABET, 2)), 4) or p["C"]
             for _ in range(rng.randint(0, 6))],
        ),
        lambda p: [([w.replace("_", p["C"])],) for w in ("_o", "o_", "o_o", "_b", "b_", "b_b")],
        _initial,
    ),
    Family(
        "scale", 1, "(xs: list[int]) -> list[int]",
        "returns the numbers of xs, each {OP} {K}, as a list in the same order.",
        "    return [x {op} {K} for x in xs]\n",
        (
            ("x {op} {K} for x in xs", "xs[i] {op} {K} for i in range(len(xs) - 1)"),
            ("for x in xs", "for x in xs if x > 0"),
        ),
        (("OP", ("multiplied by", "increased by", "decreased by")), ("K", tuple(range(2, 41)))),
        lambda rng, p: (_ints(rng, -20, 20, 6),),
        lambda p: [([1, 2],), ([-1, 0, 3],)],
        lambda p: {"op": {"multiplied by": "*", "increased by": "+", "decreased by": "-"}[p["OP"]]},
    ),
    Family(
        "count_char", 1, "(s: str) -> int", "returns how many characters of s are {V} {C}.",
        "    n = 0\n    for ch in s:\n        if ch {op} {C!r}:\n            n += 1\n    return n\n",
        (("for ch in s:", "for ch in s[1:]:"), ("for ch in s:", "for ch in s[:-1]:")),
        # Not a or z: no letter is before a or after z.
        (("V", tuple(CHAR_TESTS)), ("C", tuple(ALPHABET[1:-1]))),
        # Its letter is as likely as the three others together: counts of 0 stay rare.
        lambda rng, p: (_letters(rng, p["C"] * 3 + "".join(rng.sample(ALPHABET, 3)), 10),),
        _char_edge,
        lambda p: {"op": CHAR_TESTS[p["V"]]},
    ),
    Family(
        "first_above", 2, "(xs: list[int]) -> int",
        "returns the index of the first number in xs that is {CMP} {K}, or -1 when there is none.",
        "    for i, x in enumerate(xs):\n        if x {op} {K}:\n            return i\n    return -1\n",
        (("x {op} {K}", "x {slip} {K}"), ("return i\n", "return i + 1\n"), ("return -1", "return len(xs)")),
        (("CMP", COMPARE), ("K", tuple(range(-10, 21)))),
        lambda rng, p: (_with(rng, _ints(rng, *_around(p, 8, 4)), p["K"]),),
        lambda p: [([],)] + [
            ([p["K"] + d for d in ds],) for ds in ((0, 1), (0, -1), (1,), (-1,), (-1, 1), (1, -1))
        ],
        _compare,
    ),
    Family(
        "long_words", 2, "(s: str) -> str",
        "returns the words of s (s separates them by single spaces) that have {CMP} {K} letters, "
        "in order, joined by {SEP}.",
        "    return {sep!r}.join(w for w in s.split() if len(w) {op} {K})\n",
        (("len(w) {op} {K}", "len(w) {slip} {K}"), ("{sep!r}.join", "{wrong!r}.join")),
        (
            ("CMP", ("more than", "fewer than", "at least", "at most")), ("K", tuple(range(2, 7))),
            ("SEP", tuple(JOINERS)),
        ),
        lambda rng, p: (" ".join(rng.choices(VOCAB, k=rng.randint(0, 6))),),
        _words_edge,
        lambda p: {**_compare(p), "sep": JOINERS[p["SEP"]], "wrong": "" if p["SEP"] == "single spaces" else " "},
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
        "returns the length of the longest run of adjacent numbers in xs that are all {CMP} {K} "
        "(0 when there is none).",
        "    best = 0\n    run = 0\n    for x in xs:\n        if x {op} {K}:\n            run += 1\n"
        "            best = max(best, run)\n        else:\n            run = 0\n    return best\n",
        (("x {op} {K}", "x {slip} {K}"), ("        else:\n            run = 0\n", "")),
        (("CMP", COMPARE), ("K", tuple(range(-9, 16)))),
        lambda rng, p: (_ints(rng, p["K"] - 3, p["K"] + 3),),
        lambda p: [
            ([p["K"] + d for d in ds],) for ds in ((1, 0, 1), (-1, 0, -1), (0, -1, 0), (0, 1, 0), (0, 0))
        ],
        _compare,
    ),
    Family(
        "even_squares_mod", 3, "(xs: list[int]) -> int",
        "returns the sum of the squares of the {P} numbers in xs, modulo {K}.",
        "    return sum(x * x for x in xs if x % 2 == {r}) % {K}\n",
        (("x % 2 == {r}", "x % 2 == {w}"), (") % {K}", ")")),
        (("P", ("even", "odd")), ("K", tuple(range(3, 51)))),
        lambda rng, p: (_ints(rng, -10, 10),),
        lambda p: [([1],), ([2],), ([p["K"]],), ([p["K"] + 1],)],
        lambda p: {"r": int(p["P"] == "odd"), "w": int(p["P"] == "even")},
    ),
    Family(
        "drop_every", 3, "(s: str) -> str",
        "returns s {V} the characters whose position, counting from {B}, is a multiple of {K}.",
        "    return ''.join(ch for i, ch in enumerate(s) if {pos} % {K} {eq} 0)\n",
        (("{pos} % {K}", "{other} % {K}"), ("{eq} 0", "{neq} 0")),
        (("V", ("without", "keeping only")), ("B", (1, 0)), ("K", tuple(range(2, 21)))),
        lambda rng, p: (_letters(rng, "abcdefghijklmnop", min(2 * p["K"], 30), p["K"] // 2),),
        lambda p: [(ALPHABET[: p["K"] + 2],)],
        _drop,
    ),
    Family(
        "running_max", 3, "(xs: list[int]) -> list[int]",
        "returns a list whose item i is the {V} of {K} and the numbers xs[0] to xs[i].",
        "    best = {K}\n    out = []\n    for x in xs:\n"
        "        best = {f}(best, x)\n        out.append(best)\n    return out\n",
        (
            ("best = {f}(best, x)\n        out.append(best)", "out.append(best)\n        best = {f}(best, x)"),
            ("{f}(best, x)", "{f}({K}, x)"),
        ),
        (("V", ("largest", "smallest")), ("K", tuple(range(-20, 21)))),
        lambda rng, p: (_ints(rng, p["K"] - 8, p["K"] + 8),),
        lambda p: [([p["K"] + d for d in ds],) for ds in ((1,), (5, 1), (-1,), (-5, -1))],
        lambda p: {"f": "max" if p["V"] == "largest" else "min"},
    ),
    Family(
        "frequent", 3, "(xs: list[int]) -> list[int]",
        "returns the numbers that appear {CMP} {K} times in xs, each once, {ORDER}.",
        "    out = []\n    for x in xs:\n"
        "        if xs.count(x) {op} {K} and x not in out:\n            out.append(x)\n    return {ret}\n",
        (("count(x) {op} {K}", "count(x) {slip} {K}"), (" and x not in out", "")),
        (("CMP", ("at least", "more than", "exactly", "at most")), ("K", (2, 3, 4, 5, 6, 7)),
         ("ORDER", tuple(ORDERS))),
        # Three values at most: repeats, hence answers other than [], are common.
        lambda rng, p: (rng.choices(rng.sample(range(-3, 10), 3), k=rng.randint(0, 8)),),
        lambda p: [([5] * p["K"],), ([5] * (p["K"] + 1),), ([2] * p["K"],), ([2] * (p["K"] + 1),)],
        lambda p: {**_compare(p), "ret": ORDERS[p["ORDER"]]},
    ),
)
# fmt: on
STRATA: tuple[tuple[Family, ...], ...] = tuple(
    tuple(f for f in FAMILIES if f.stratum == k) for k in range(MAX_STRATA)
)
_PATTERNS = {f.name: f.pattern() for f in FAMILIES}


def call_text(entry_point: str, args: tuple | list) -> str:
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
    prompt, fields = family.prompt(params), family.fields(params)
    header = f"def {family.name}{family.signature}:\n"
    body = family.body.format(**fields)
    old, new = random.Random(f"coding:bug:{prompt}").choice(family.bugs)
    old, new = old.format(**fields), new.format(**fields)
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
    hidden = _draw_inputs(family, rng, params, rng.randint(MIN_TESTS, MAX_TESTS), taken=[])
    examples = _draw_inputs(family, rng, params, EXAMPLE_TESTS, taken=hidden)

    def fails(args: tuple) -> bool:
        return _result(buggy, family.name, args) != _result(reference, family.name, args)

    hidden = _showing_the_slip(family, rng, params, hidden, fails, taken=examples)
    examples = _showing_the_slip(family, rng, params, examples, fails, taken=hidden)

    def tests(inputs: list[tuple]) -> tuple:
        return tuple((args, json.loads(_result(reference, family.name, args))) for args in inputs)

    return Problem(family.name, family.name, prompt, reference, buggy, tests(hidden), tests(examples))


def _draw_inputs(
    family: Family, rng: random.Random, params: dict, want: int, taken: list[tuple]
) -> list[tuple]:
    """`want` distinct inputs, none of them in `taken`, where the draws allow (a tiny domain, repeat_text's words,
    may need a few redraws)."""
    inputs: list[tuple] = []
    for _ in range(20 * MAX_TESTS):
        args = family.draw(rng, params)
        if args not in inputs and args not in taken:
            inputs.append(args)
        if len(inputs) == want:
            break
    return inputs


def _showing_the_slip(
    family: Family,
    rng: random.Random,
    params: dict,
    inputs: list[tuple],
    fails: Callable[[tuple], bool],
    taken: list[tuple],
) -> list[tuple]:
    """`inputs`, its last one swapped for one that shows the slip (a boundary input, else a further draw; never
    one in `taken`) when none of them does."""
    if any(fails(args) for args in inputs):
        return inputs
    drawn = (family.draw(rng, params) for _ in range(SLIP_DRAWS))
    candidates = itertools.chain(family.edges(params), drawn)
    edge = next(
        (args for args in candidates if fails(args) and args not in taken and args not in inputs), None
    )
    if edge is None:
        raise RuntimeError(f"{family.name} {params}: no test tells the slip from the reference")
    return [*inputs[:-1], edge]


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
