"""Checks of the whole params against the selected environment, before the first stage runs.

Each stage validates its own section when it starts; what only fails when a later stage meets the environment (too
few eval episodes per cell, a rollout option the env cannot score) would otherwise surface after minutes of
training. `preflight(params)` builds the env as the pipeline will (its settings and the split sizes of `generate`),
builds its held-out splits and asks it those questions up front; the flow calls it before the first stage.

python -m tasks.params.preflight [--params params.yaml] [--profile NAME]
"""

from __future__ import annotations

import argparse
import sys

from tasks.params.launch_checks import LAUNCHED, launch_problems
from tasks.params.load import load_params, read_params
from tasks.params.recipe import recipe_line
from tasks.params.sections import Params
from wander import Environment, load_environment
from wander.core.capabilities import LosingLines
from wander.core.pipeline_hooks import games_per_cell, reply_budget
from wander.training.grpo import rollout_func


class PreflightError(ValueError):
    """A params value the selected environment cannot run with: the key, the problem, the fix."""


def problems(params: Params) -> list[str]:
    """Every problem found, one line each naming the params key and the fix; [] when the params can run."""
    env = load_environment(**params.env.kwargs(), **params.generate.env_settings())
    found = []
    for split in ("eval", "test"):  # the held-out splits the generate stage builds: an env may hold too few
        try:
            env.get_dataset(split)
        except ValueError as exc:
            found.append(f"generate.num_{split}: {exc}")
    evaluate = params.evaluate
    try:  # the frozen suite the evaluate stage plays: its column names, and enough eval episodes per cell
        groups = evaluate.opponents or list(env.evaluation_suite().groups)
        env.suite_specs(groups, games_per_cell(env, evaluate.games), evaluate.seed)
    except ValueError as exc:
        most = env.suite_games()
        hint = (
            f" (null = the env's {most})" if evaluate.games is not None and 0 < most < evaluate.games else ""
        )
        found.append(f"evaluate.games / evaluate.opponents: {exc}{hint}")
    grpo = params.grpo
    try:  # the rollout GRPO will build: decision rollouts check play_on, explore, branch_at against the env
        rollout_func(env, grpo.rollout())
    except ValueError as exc:  # MissingCapability included
        found.append(f"grpo.play_on / grpo.explore / grpo.branch_at: {exc}")
    if grpo.until_unbeaten and not isinstance(env, LosingLines):
        found.append(
            f"grpo.until_unbeaten: {params.env.name} cannot name a line that beats the model (no LosingLines "
            "capability, wander/core/capabilities.py); set it false"
        )
    if grpo.until_unbeaten and not grpo.curve_every:
        found.append("grpo.until_unbeaten: stages are checked at learning-curve points; set grpo.curve_every")
    if (
        grpo.until_unbeaten and grpo.processes > 1
    ):  # the main process alone plays the curve and would stop alone
        found.append(
            "grpo.until_unbeaten: decided on one process; set grpo.processes 1 or until_unbeaten false"
        )
    for stage in LAUNCHED:  # several processes: batches that split, a launcher this machine can run
        found += launch_problems(params, stage)
    budgets = reply_budgets(params, env)
    evaluated, replayed = budgets["evaluate.max_new_tokens"], budgets["register.max_new_tokens"]
    if evaluated != replayed:  # the champion must answer the candidate's suite with the candidate's budget
        found.append(
            f"register.max_new_tokens: replays the champion with {replayed} tokens per reply where evaluate gives "
            f"the candidate {evaluated}; set both null (the env's reply budget) or to one number"
        )
    return found


def reply_budgets(params: Params, env: Environment) -> dict[str, int]:
    """The three reply budgets in tokens as the stages resolve them with `env` (null = the env's), by params key."""
    return {
        "grpo.max_completion_length": params.grpo.rollout().completion_budget(
            env, params.grpo.max_completion_length
        ),
        "evaluate.max_new_tokens": reply_budget(env, params.evaluate.max_new_tokens),
        "register.max_new_tokens": reply_budget(env, params.register.max_new_tokens),
    }


def budget_line(params: Params, env: Environment) -> str:
    """One line saying the reply budgets and the games per cell as the stages resolve them with `env`, and which of
    them are the env's."""
    budgets = reply_budgets(params, env)
    given = {
        "grpo.max_completion_length": params.grpo.max_completion_length,
        "evaluate.max_new_tokens": params.evaluate.max_new_tokens,
        "register.max_new_tokens": params.register.max_new_tokens,
    }
    parts = [
        f"{key} {tokens}" + (" (set)" if given[key] is not None else "") for key, tokens in budgets.items()
    ]
    games = games_per_cell(env, params.evaluate.games)
    set_games = " (set)" if params.evaluate.games is not None else ""
    return (
        f"reply budget (tokens; null = env {params.env.name}'s): "
        + ", ".join(parts)
        + f"; games per cell: evaluate.games {games}{set_games}"
    )


def preflight(params: Params) -> None:
    """Raise PreflightError listing every problem of `params` with its environment."""
    found = problems(params)
    if found:
        raise PreflightError(
            f"params.yaml cannot run with env {params.env.name!r}; nothing was run:\n"
            + "\n".join(f"  - {p}" for p in found)
        )


def main(argv: list[str] | None = None) -> int:
    """Check params.yaml (with a profile) and print the problems; exit 2 when there are any."""
    parser = argparse.ArgumentParser(
        prog="python -m tasks.params.preflight", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--profile", default=None)
    args = parser.parse_args(argv)
    raw = read_params(args.params, args.profile)
    params = load_params(args.params, params=raw)
    try:
        preflight(params)
    except PreflightError as exc:
        print(exc, file=sys.stderr)
        return 2
    env = load_environment(**params.env.kwargs(), **params.generate.env_settings())
    print(f"{args.params}: ready to run; {budget_line(params, env)}")
    print(recipe_line(raw))
    return 0


if __name__ == "__main__":
    sys.exit(main())
