"""`python -m flows.ui`: `wander ui` on the project's run, its params read through the params model.

The library's UI reads no params file (wander/ui/run_config.py). Here the params file (with a profile) is loaded by
`tasks.params.load.load_params`, which checks it and fills what it leaves to the env (its recipe, the lineage of its
GRPO curriculum), and the UI is handed the typed values: the evaluate stage's folder, the stages' metrics folder, the
env and its settings, the lineage and the registered model's name. The project folder is the params file's: every
folder the params name is relative to it. The registry and the learning curves are read through MLflow's client
(`tasks.runtime.tracking_reader`), on the store the stages log to: `MLFLOW_TRACKING_URI` (a team's tracking server),
else the project's sqlite store. Every other option is `wander ui`'s own (`add_serve_arguments`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tasks.params.load import add_params_arguments, load_params
from tasks.runtime.tracking_reader import MlflowRunStore
from wander.cli.arguments import port_number
from wander.core.offline import stay_offline
from wander.ui.app import add_serve_arguments, serve
from wander.ui.run_config import RunConfig


def run_config(params_file: str | Path, profile: str | None = None) -> RunConfig:
    """What the UI is told of the run whose params are `params_file` (with `profile`), read by the params model."""
    params = load_params(params_file, profile)
    return RunConfig(
        root=Path(params_file).resolve().parent,
        eval_dir=params.evaluate.out_dir,
        metrics_dir=params.layout.metrics,
        env=params.env.kwargs(),
        # Null only in params with no GRPO curriculum to derive it from: then there is no lineage to show.
        lineage=dict(params.register.lineage or {}),
        model_name=params.registered_model_name(),
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m flows.ui [--params FILE] [--profile NAME] [wander ui's serving options]`: serve until interrupted."""
    stay_offline()  # as `wander`: the UI loads models from local folders and asks no hub
    parser = argparse.ArgumentParser(prog="python -m flows.ui", description=__doc__.splitlines()[0])
    add_params_arguments(parser)
    add_serve_arguments(parser, port_number)
    args = parser.parse_args(argv)
    try:
        run = run_config(args.params, args.profile)
        return serve(run, args, MlflowRunStore(run.root))
    # Params the model refuses (a ParamsError) or a bad serving option: one line, as `wander`'s.
    except ValueError as exc:
        print(f"ui: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
