"""`wander ui`: one local web app with three views of a pipeline run (Play, Episodes, Curves and lineage).

FastAPI with server-rendered pages (wander/ui/pages.py). It reads only the run's own files and the local MLflow
store (wander/ui/run_files.py) and binds to loopback unless told otherwise.
"""

from __future__ import annotations

import argparse
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import RedirectResponse

from wander.core.environment import Environment
from wander.core.policy import Policy
from wander.core.registry import load_environment
from wander.policies.loading import make_policy
from wander.ui import curves_view, episodes_view, play_view
from wander.ui.play import Games, PlayError
from wander.ui.run_files import RunFiles

MAX_POLICIES = 4  # loaded policies kept (a model folder takes seconds to load)


class UIState:
    """What the views share: the run, the games, and the environments and policies loaded so far."""

    def __init__(self, root: str | Path = ".", seed: int = 0):
        self.run = RunFiles(root)
        self.games = Games(seed)
        self.seed = seed
        self._envs: dict[str, Environment] = {}
        self._policies: OrderedDict[tuple[str, str], Policy] = OrderedDict()
        self._lock = threading.Lock()

    def environment(self, name: str | None = None) -> Environment:
        """The run's environment (its settings), or another one by name with its defaults."""
        run_env = self.run.env_kwargs()
        key = name or run_env["name"]
        with self._lock:
            if key not in self._envs:
                kwargs = run_env if key == run_env["name"] else {"name": key}
                try:
                    self._envs[key] = load_environment(**kwargs)
                except (ImportError, KeyError, TypeError) as exc:
                    raise PlayError(f"unknown environment {key!r}: {exc}") from None
            return self._envs[key]

    def policy(self, spec: str, env: Environment) -> Policy:
        """A policy by spec: `champion` (the registry's alias), a lineage name, a folder, a scripted player, a URL."""
        if not spec:
            raise PlayError("name a policy: champion, a model folder, a scripted player or a URL")
        key = (env.name, spec)
        with self._lock:
            if key in self._policies:
                self._policies.move_to_end(key)
                return self._policies[key]
        # The env's reply budget: a tool env's calls or a reversal outgrow a move's few tokens.
        policy = make_policy(self._resolve(spec), seed=self.seed, max_new_tokens=env.reply_tokens(), env=env)
        with self._lock:
            self._policies[key] = policy
            while len(self._policies) > MAX_POLICIES:
                self._policies.popitem(last=False)
        return policy

    def _resolve(self, spec: str) -> str:
        if spec == "champion":
            folder = self.run.alias_checkpoint("champion")
            if folder is None:
                raise PlayError(
                    f"no registered champion in {self.run.root / 'mlflow/mlflow.db'}: run the pipeline (`make run`), "
                    "or name a model folder, a scripted player (minimax, random, teacher) or a URL"
                )
            return str(folder)
        lineage = dict(self.run.lineage())
        if spec in lineage:
            return str(lineage[spec])
        if spec.startswith(("http://", "https://")) or Path(spec).is_absolute():
            return spec
        folder = self.run.root / spec
        return str(folder) if folder.exists() else spec


def create_app(root: str | Path = ".", seed: int = 0) -> FastAPI:
    """The app for the run in `root`; `seed` draws the games' episode seeds."""
    app = FastAPI(title="wander ui", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.ui = UIState(root, seed)
    for view in (play_view, episodes_view, curves_view):
        app.include_router(view.router)

    @app.get("/", include_in_schema=False)
    def home() -> RedirectResponse:
        return RedirectResponse("/play")

    return app


def ui_command(args: argparse.Namespace) -> int:
    """Serve the UI until interrupted."""
    import uvicorn

    root = Path(args.root)
    if not root.is_dir():
        raise ValueError(
            f"--root {root} is not a folder: give the project folder of a run (where params.yaml is)"
        )
    app = create_app(root, args.seed)
    print(f"wander ui for {root.resolve()} at http://{args.host}:{args.port}/ (Ctrl-C stops it)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def register(sub: Any, port_type: Any = int) -> None:
    """Add the `ui` subcommand to the `wander` parser's subparsers."""
    p = sub.add_parser(
        "ui", help="a local web app: play the champion, replay evaluation games, see the curves"
    )
    p.add_argument("--root", default=".", help="the project folder of the run (default: here)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default loopback only)")
    p.add_argument("--port", type=port_type, default=8501, help="port (default 8501)")
    p.add_argument("--seed", type=int, default=0, help="seed of the games' episode seeds (default 0)")
    p.set_defaults(func=ui_command)
