"""Checks of the whole params against the selected environment, before the first stage runs.

Each stage validates its own section when it starts; what only fails when a later stage meets the environment (too
few eval episodes per cell, a rollout option the env cannot score) would otherwise surface after minutes of
training. `preflight(params)` builds the env as the pipeline will (its settings and the split sizes of `generate`)
and asks it those questions up front; the flow calls it before the first stage.

python -m tasks.plumbing.preflight [--params params.yaml] [--profile NAME]
"""

from __future__ import annotations

import argparse
import sys

from tasks.plumbing.params import load_params
from tasks.plumbing.sections import Params
from wander import load_environment
from wander.training.grpo import rollout_func
from wander.training.rollout_config import RolloutConfig


class PreflightError(ValueError):
    """A params value the selected environment cannot run with: the key, the problem, the fix."""


def problems(params: Params) -> list[str]:
    """Every problem found, one line each naming the params key and the fix; [] when the params can run."""
    env = load_environment(**params.env.kwargs(), **params.generate.env_settings())
    found = []
    evaluate = params.evaluate
    try:  # the frozen suite the evaluate stage plays: its column names, and enough eval episodes per cell
        env.suite_specs(
            evaluate.opponents or list(env.evaluation_suite().groups), evaluate.games, evaluate.seed
        )
    except ValueError as exc:
        found.append(f"evaluate.games / evaluate.opponents: {exc}")
    grpo = params.grpo
    try:  # the rollout GRPO will build: decision rollouts check play_on and explore against the env
        rollout_func(env, RolloutConfig(play_on=grpo.play_on, explore=grpo.explore))
    except ValueError as exc:  # MissingCapability included
        found.append(f"grpo.play_on / grpo.explore: {exc}")
    return found


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
        prog="python -m tasks.plumbing.preflight", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--profile", default=None)
    args = parser.parse_args(argv)
    try:
        preflight(load_params(args.params, profile=args.profile))
    except PreflightError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(f"{args.params}: ready to run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
