"""coding's problems: references pass their tests and slips fail one, tests are plain JSON, prompts vary with
the seed yet read back into the same reference and slip, and other text is refused."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envs.coding.problems import FAMILIES, MAX_STRATA, Problem, call_text, make_problem, read_problem

SEEDS = range(200)


def run(source: str, entry_point: str, args: tuple) -> object:
    """The call's value as JSON text (True and 1 differ), or the exception's type when it raises."""
    namespace: dict = {}
    exec(source, namespace)
    try:
        return json.dumps(namespace[entry_point](*json.loads(json.dumps(args))))
    except Exception as error:
        return type(error)


def passes(source: str, problem: Problem) -> list[bool]:
    """For each test: whether `source` returns its expected value."""
    return [run(source, problem.entry_point, args) == json.dumps(want) for args, want in problem.tests]


@pytest.mark.parametrize("stratum", range(MAX_STRATA))
def test_every_problem_is_sound(stratum: int) -> None:
    for seed in SEEDS:
        problem = make_problem(seed, stratum)
        assert all(passes(problem.reference, problem)), (seed, problem.prompt)
        assert not all(passes(problem.buggy, problem)), (seed, problem.prompt)
        assert 5 <= len(problem.tests) <= 8
        for args, want in problem.tests:
            assert isinstance(args, tuple)
            assert json.loads(json.dumps([list(args), want])) == [list(args), want]
            # Small inputs: a test's call must read at a glance in feedback.
            assert all(len(a) <= 8 for a in args if isinstance(a, list))
            assert all(len(a) <= 48 for a in args if isinstance(a, str))
        assert problem.prompt.startswith(f"Write a Python function `{problem.entry_point}(")
        assert "\n" not in problem.prompt and "`" not in problem.prompt.split("` that ", 1)[1]
        signature = re.match(r"Write a Python function `([^`]+)` that ", problem.prompt)[1]
        assert problem.reference.startswith(f"def {signature}:\n    ") and problem.reference.endswith("\n")
        assert problem.buggy.startswith(f"def {signature}:\n    ") and problem.buggy != problem.reference
        read = read_problem(problem.prompt)
        assert read == Problem(
            problem.family, problem.entry_point, problem.prompt, problem.reference, problem.buggy, ()
        )


@pytest.mark.parametrize("stratum", range(MAX_STRATA))
def test_problems_are_deterministic_and_varied(stratum: int) -> None:
    assert make_problem(7, stratum) == make_problem(7, stratum)
    assert len({make_problem(seed, stratum).prompt for seed in SEEDS}) >= 50
    assert len({repr(make_problem(seed, stratum).tests) for seed in SEEDS}) >= 190


@pytest.mark.parametrize("stratum", range(MAX_STRATA))
def test_every_family_appears_in_its_stratum(stratum: int) -> None:
    families = {f.name for f in FAMILIES if f.stratum == stratum}
    assert len(families) >= 3
    assert {make_problem(seed, stratum).family for seed in SEEDS} == families
    assert {make_problem(seed, stratum).entry_point for seed in SEEDS} == families


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_every_slip_a_prompt_can_name_has_an_input_that_shows_it(family) -> None:
    # Drawn tests may all miss the slip; then make_problem falls back on the family's boundary inputs.
    names = [name for name, _ in family.domains]
    for values in itertools.product(*(domain for _, domain in family.domains)):
        params = dict(zip(names, values, strict=True))
        problem = read_problem(family.prompt(params))
        assert any(
            run(problem.reference, family.name, args) != run(problem.buggy, family.name, args)
            for args in family.edges(params)
        ), problem.prompt


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_a_family_slips_in_more_than_one_way(family) -> None:
    def slip(problem: Problem) -> str:
        changed = set(problem.buggy.splitlines()) ^ set(problem.reference.splitlines())
        return re.sub(r"'[a-z]*'|-?\d+", "_", "\n".join(sorted(changed)))

    names = [name for name, _ in family.domains]
    prompts = [
        family.prompt(dict(zip(names, v, strict=True)))
        for v in itertools.product(*dict(family.domains).values())
    ]
    assert len({slip(read_problem(prompt)) for prompt in prompts}) >= 2


def test_read_problem_refuses_other_text() -> None:
    valid = make_problem(3, 1).prompt
    for text in (
        "",
        "What is 2 + 2?",
        "Lockers: A1, B2. What do they hold in total?",
        valid.replace("Write a Python function", "Write a function"),
        valid + " Also print it.",
        "Write a Python function `sum_above(xs: list[int]) -> int` that returns the sum of the numbers in xs "
        "that are greater than 999.",
        "Write a Python function `count_char(s: str) -> int` that returns how many times the character ab occurs in s.",
        "Write a Python function `count_char(s: str) -> int` that returns how many characters of s are equal to ab.",
        # A field the constants decide (here the text in parentheses) must be the one they decide.
        "Write a Python function `last_chars(s: str) -> str` that returns the first 3 characters of s "
        "(the empty string when s is shorter).",
        "Write a Python function `is_multiple(n: int) -> bool` that returns True when n is maybe divisible by 3 "
        "and False otherwise.",
    ):
        with pytest.raises(ValueError, match="not a problem of this environment"):
            read_problem(text)


@pytest.mark.parametrize("stratum", [-1, MAX_STRATA])
def test_make_problem_refuses_strata_outside_the_range(stratum: int) -> None:
    with pytest.raises(ValueError):
        make_problem(0, stratum)


def test_call_text_reads_as_python() -> None:
    assert call_text("sum_above", ([1, 9], 3)) == "sum_above([1, 9], 3)"
    assert call_text("last_chars", ("it's",)) == 'last_chars("it\'s")'
    assert call_text("affine", (-4,)) == "affine(-4)"


def every_params(family) -> list[dict]:
    """Every combination of the family's constants."""
    names = [name for name, _ in family.domains]
    return [dict(zip(names, v, strict=True)) for v in itertools.product(*(d for _, d in family.domains))]


def test_every_family_states_many_distinct_problems() -> None:
    # Few distinct prompts per family would let the eval split repeat train's problems (memory, not skill).
    prompts: dict[str, set[str]] = {f.name: set() for f in FAMILIES}
    for stratum in range(MAX_STRATA):
        for seed in range(3000):
            problem = make_problem(seed, stratum)
            prompts[problem.family].add(problem.prompt)
    assert {name: len(seen) for name, seen in prompts.items() if len(seen) < 60} == {}
    for family in FAMILIES:  # every combination of constants reads as its own prompt
        assert len({family.prompt(params) for params in every_params(family)}) == len(every_params(family))


def test_every_reference_and_slip_is_short_lint_free_code(tmp_path) -> None:
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        pytest.skip("ruff is not installed next to this Python")
    for family in FAMILIES:
        for i, params in enumerate(every_params(family)):
            problem = read_problem(family.prompt(params))
            for kind, code in (("reference", problem.reference), ("buggy", problem.buggy)):
                # Short solutions a small model can learn, and a teacher's reply can hold.
                assert len(code) <= 400 and len(code.splitlines()) <= 10, code
                (tmp_path / f"{family.name}_{i}_{kind}.py").write_text(code)
    done = subprocess.run(
        [
            str(ruff),
            "check",
            "--isolated",
            "--select",
            "E,F,W,B",
            "--output-format",
            "concise",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:]
