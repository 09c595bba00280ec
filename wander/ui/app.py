"""`wander ui`: one local web app with three views of a pipeline run (Play, Episodes, Curves and lineage).

FastAPI with server-rendered pages (wander/ui/pages.py). It reads the run's own files (wander/ui/run_files.py), where
its `RunConfig` says they lie (wander/ui/run_config.py: the library reads no params file; the project's
`python -m flows.ui` reads params.yaml through its params model), and the registry and learning curves through the
`RunStore` it is handed (wander/ui/tracking_store.py: the project's reads MLflow through its client; the library's
own `wander ui` has none and says so), and binds to loopback unless told otherwise. It answers only its own pages (Host,
Origin and CSRF-token checks, wander/ui/guard.py), bounds request bodies, loads only the models the user allowed
(wander/ui/models.py) and registered environments, and keeps bounded caches of them.
"""

from __future__ import annotations

import argparse
import threading
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import RedirectResponse

from wander.core.environment import Environment
from wander.core.policy import Policy
from wander.core.registry import environment_names, load_environment
from wander.policies.loading import make_policy
from wander.serve.guards import BodyLimit
from wander.ui import curves_view, episodes_view, play_view
from wander.ui.guard import SameOrigin, new_token
from wander.ui.models import SCRIPTED_HINT, ModelAccess
from wander.ui.play import Games, PlayError
from wander.ui.run_config import RunConfig
from wander.ui.run_files import RunFiles
from wander.ui.tracking_store import NO_STORE, RunStore, TrackingStoreError

MAX_POLICIES = 4  # loaded policies kept (a model folder takes seconds to load)
MAX_ENVS = 8  # environments kept (each holds its datasets); the oldest used goes first
MAX_BODY = 64 * 1024  # bytes of a request body: a typed turn is the longest thing a form sends


class UIState:
    """What the views share: the run's files, its tracking store (None: not connected), the games, and the
    environments and policies loaded so far."""

    def __init__(
        self, run: RunConfig, seed: int = 0, access: ModelAccess | None = None, store: RunStore | None = None
    ):
        self.run = RunFiles(run)
        self.store = store
        self.games = Games(seed)
        self.seed = seed
        self.access = access or ModelAccess(self.run.root)
        self.csrf = new_token()
        self._envs: OrderedDict[str, Environment] = OrderedDict()
        self._policies: OrderedDict[tuple[str, str], Policy] = OrderedDict()
        self._lock = threading.Lock()

    def environment_names(self) -> list[str]:
        """The environments the Play form offers: the registered ones and the run's own."""
        return sorted({*environment_names(), self.run.config.env_name})

    def environment(self, name: str | None = None) -> Environment:
        """The run's environment (its settings), or a registered one by name with its defaults; a PlayError saying
        why when it cannot be played here."""
        run_env = self.run.config.env
        key = name or run_env["name"]
        # The run's own env is what the user configured; any other must be a registered one (no module path,
        # no `openenv:URL`: a form must not make the server import or connect to what it names).
        if key not in self.environment_names():
            raise PlayError(
                f"unknown environment {key!r}: the UI plays the registered environments "
                f"({', '.join(environment_names())}) and the run's own ({run_env['name']})"
            )
        with self._lock:
            if key in self._envs:
                self._envs.move_to_end(key)
                return self._envs[key]
        kwargs = run_env if key == run_env["name"] else {"name": key}
        try:
            env = load_environment(**kwargs)
        except (ImportError, KeyError, TypeError) as exc:
            raise PlayError(f"unknown environment {key!r}: {exc}") from None
        # A registered env this machine cannot build (coding without bubblewrap for its sandbox raises the
        # sandbox's RuntimeError) is said on the page like any other refusal, its factory's words naming what is
        # missing: whatever the env's own code raises, the form was valid and the server goes on.
        except Exception as exc:  # noqa: BLE001
            raise PlayError(f"environment {key!r} cannot be played on this machine: {exc}") from None
        with self._lock:
            self._envs[key] = env
            while len(self._envs) > MAX_ENVS:
                self._envs.popitem(last=False)
        return env

    def policy(self, spec: str, env: Environment) -> Policy:
        """A policy by spec: `champion` (the registry's alias), a lineage name, a scripted player, a model folder
        under the project, or a URL the user allowed (`wander.ui.models`)."""
        if not spec:
            raise PlayError("name a policy: champion, a model folder, a scripted player or a URL")
        key = (env.name, spec)
        with self._lock:
            if key in self._policies:
                self._policies.move_to_end(key)
                return self._policies[key]
        policy = self._load(spec, env)
        with self._lock:
            self._policies[key] = policy
            while len(self._policies) > MAX_POLICIES:
                self._policies.popitem(last=False)
        return policy

    def _load(self, spec: str, env: Environment) -> Policy:
        # The env's reply budget: a tool env's calls or a reversal outgrow a move's few tokens.
        budget = dict(seed=self.seed, max_new_tokens=env.reply_tokens(), env=env)
        folder = self._named_folder(spec)
        if folder is None:
            scripted = env.scripted_policy(spec, self.seed)
            if scripted is not None:
                return scripted
            resolved = self.access.resolve(spec)
            if resolved.url is not None:
                return make_policy(resolved.url, api_key_env=resolved.api_key_env, **budget)
            folder = resolved.folder
        try:
            return make_policy(str(folder), **budget)
        # A folder that holds no loadable model: said on the page, the server goes on.
        except Exception as exc:
            raise PlayError(f"could not load the model in {folder}: {type(exc).__name__}: {exc}") from None

    def _named_folder(self, spec: str) -> Path | None:
        """The folder of `champion` or of a lineage name (the run's own, so trusted); None for other specs."""
        if spec == "champion":
            instead = f"name a model folder, {SCRIPTED_HINT} or a URL"
            model = self.run.config.model_name
            if self.store is None:
                raise PlayError(f"no registered champion: {NO_STORE}; or {instead}")
            try:
                folder = None if model is None else self.store.checkpoint(model, "champion")
            except TrackingStoreError as exc:
                raise PlayError(f"no registered champion: {exc}; or {instead}") from None
            if folder is None:
                raise PlayError(
                    f"no registered champion of {model or 'a model (no model name given)'} in {self.store.location}: "
                    f"run the pipeline (`make run`), or {instead}"
                )
            return folder
        return dict(self.run.lineage()).get(spec)


def create_app(
    run: RunConfig,
    seed: int = 0,
    allow_remote_models: bool = False,
    api_key_endpoints: Iterable[str] = (),
    store: RunStore | None = None,
) -> FastAPI:
    """The app for `run` and its tracking `store` (None: the pages say none is connected); `seed` draws the games'
    episode seeds; the rest: `wander.ui.models`."""
    app = FastAPI(title="wander ui", docs_url=None, redoc_url=None, openapi_url=None)
    access = ModelAccess(Path(run.root), allow_remote_models, tuple(api_key_endpoints))
    app.state.ui = UIState(run, seed, access, store)
    for view in (play_view, episodes_view, curves_view):
        app.include_router(view.router)

    @app.get("/", include_in_schema=False)
    def home() -> RedirectResponse:
        return RedirectResponse("/play")

    # Added last, runs first: the body is bounded before the guard reads the form's token.
    app.add_middleware(SameOrigin, token=app.state.ui.csrf)
    app.add_middleware(BodyLimit, limit=MAX_BODY)
    return app


def serve(run: RunConfig, args: argparse.Namespace, store: RunStore | None = None) -> int:
    """Serve the UI of `run` (and its tracking `store`, if any) with the options of `add_serve_arguments` until
    interrupted."""
    import uvicorn

    root = Path(run.root)
    if not root.is_dir():
        raise ValueError(f"{root} is not a folder: give the project folder of a run")
    app = create_app(run, args.seed, args.allow_remote_models, args.api_key_endpoint, store)
    tracking = store.location if store is not None else "no tracking store"
    print(
        f"wander ui for {root.resolve()} ({tracking}) at http://{args.host}:{args.port}/ (Ctrl-C stops it)",
        flush=True,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def ui_command(args: argparse.Namespace) -> int:
    """`wander ui`: serve the UI of a plain folder, described by the command's options, with no tracking store (the
    library never imports mlflow: `python -m flows.ui` hands the UI one)."""
    run = RunConfig(
        Path(args.root),
        eval_dir=args.eval_dir,
        metrics_dir=args.metrics_dir,
        env={"name": args.env},
        lineage=dict(args.lineage),
        model_name=args.model_name,
    )
    return serve(run, args)


def add_serve_arguments(parser: argparse.ArgumentParser, port_type: Any = int) -> None:
    """How the UI is served: its interface, port and games' seed, and the models its Play form may load."""
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default loopback only)")
    parser.add_argument("--port", type=port_type, default=8501, help="port (default 8501)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the games' episode seeds (default 0)")
    parser.add_argument(
        "--allow-remote-models",
        action="store_true",
        help="let the Play form load a model URL on another machine (default: loopback URLs only)",
    )
    parser.add_argument(
        "--api-key-endpoint",
        action="append",
        default=[],
        metavar="URL",
        help="send OPENAI_API_KEY to model URLs of this endpoint (scheme, host, port); repeatable; "
        "default: the key goes to no model URL",
    )


def lineage_entry(text: str) -> tuple[str, str]:
    """A `NAME=FOLDER` lineage entry from the command line."""
    name, sep, folder = text.partition("=")
    if not sep or not name or not folder:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=FOLDER")
    return name, folder


def register(sub: Any, port_type: Any = int) -> None:
    """Add the `ui` subcommand to the `wander` parser's subparsers."""
    p = sub.add_parser(
        "ui",
        help="a local web app: play the champion, replay evaluation games, see the curves (a pipeline run: "
        "python -m flows.ui)",
    )
    p.add_argument("--root", default=".", help="the project folder of the run (default: here)")
    add_serve_arguments(p, port_type)
    defaults = RunConfig(Path("."))
    p.add_argument(
        "--env", default=defaults.env_name, help=f"the run's environment (default {defaults.env_name})"
    )
    p.add_argument(
        "--eval-dir",
        default=defaults.eval_dir,
        help=f"the evaluation's folder under the root (default {defaults.eval_dir})",
    )
    p.add_argument("--metrics-dir", help="the stages' metrics folder under the root (default: none shown)")
    p.add_argument(
        "--lineage",
        action="append",
        type=lineage_entry,
        default=[],
        metavar="NAME=FOLDER",
        help="a checkpoint of the lineage, in training order; repeatable (default: none)",
    )
    p.add_argument(
        "--model-name",
        help="the registered model's name (default: none); its registry is read only with a tracking store: "
        "python -m flows.ui",
    )
    p.set_defaults(func=ui_command)
