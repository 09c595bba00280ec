"""A small pipeline run for `wander ui`, built cheaply: a tiny untrained model as the lineage's only checkpoint, a
real evaluation (wander.eval.evaluation.evaluate: the tiny model and two scripted rows, 2 games per cell), a stage
metrics file, and a real MLflow sqlite store with a stage run's per-step metrics and the model registered as the
`champion` version; and the `RunConfig` and the tracking store (MLflow's client on that store) the project's
`python -m flows.ui` would hand the UI for it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import httpx
import pytest

from wander.ui.run_config import RunConfig
from wander.ui.tracking_store import RunStore

ENV = dict(rendering="compact", num_groups=2, num_train=32, num_eval=8, num_test=8, max_turns=4)
# hidden 64, 2 layers (as tests/wander/training): an untrained model whose replies are mostly not moves.
TINY = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=2,
    intermediate_size=128,
    vocab_size=512,
)


def build_run(root: Path) -> Path:
    """Write the run's files under `root`; return it."""
    import mlflow

    from wander import load_environment
    from wander.eval.config import EvaluateConfig
    from wander.eval.evaluation import evaluate
    from wander.policies.scratch_model import build_scratch_model
    from wander.policies.scratch_model_config import ScratchModelConfig

    env = load_environment("tictactoe", **ENV)
    build_scratch_model(env.corpus(), root / "data/models/base", ScratchModelConfig(**TINY))
    config = EvaluateConfig(
        policies={"base": str(root / "data/models/base"), "minimax": "minimax", "random": "random"},
        opponents=["random", "minimax-0"],
        games=2,
        max_new_tokens=8,
        out_dir=str(root / "data/eval"),
        baseline=None,
    )
    evaluate(config, env=env)
    (root / "data/metrics").mkdir(parents=True)
    (root / "data/metrics/build_model.json").write_text(json.dumps({"parameters": 61000}), encoding="utf-8")

    (root / "mlflow").mkdir()
    mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow/mlflow.db'}")
    with mlflow.start_run(run_name="pipeline") as parent:
        with mlflow.start_run(run_name="build_model", nested=True, parent_run_id=parent.info.run_id) as stage:
            for step in range(5):
                mlflow.log_metric("loss", 2.0 / (step + 1), step=step)
    client = mlflow.MlflowClient()
    client.create_registered_model("wander-tictactoe")
    version = client.create_model_version(
        "wander-tictactoe",
        source="data/models/base",
        run_id=stage.info.run_id,
        tags={"wander.checkpoint": "data/models/base", "wander.parent": "none", "wander.promoted": "true"},
    )
    client.set_registered_model_alias("wander-tictactoe", "champion", version.version)
    mlflow.set_tracking_uri(None)
    return root


def described(root: Path) -> RunConfig:
    """The run in `root` as the UI is told of it: its folders, env settings, lineage and registered model."""
    return RunConfig(
        root,
        metrics_dir="data/metrics",
        env={"name": "tictactoe", **ENV},
        lineage={"base": "data/models/base"},
        model_name="wander-tictactoe",
    )


@pytest.fixture(scope="session")
def run_root(tmp_path_factory) -> Path:
    """A project folder after a (tiny) pipeline run (built once: no test writes to it)."""
    return build_run(tmp_path_factory.mktemp("run"))


@pytest.fixture(scope="session")
def run_config(run_root) -> RunConfig:
    """The tiny run as the UI is told of it."""
    return described(run_root)


@pytest.fixture(scope="session")
def run_store(run_root) -> RunStore:
    """The tiny run's MLflow store read through MLflow's client, as `python -m flows.ui` reads it."""
    from tasks.runtime.tracking import project_store
    from tasks.runtime.tracking_reader import MlflowRunStore

    return MlflowRunStore(run_root, project_store(run_root))  # named: whatever MLFLOW_TRACKING_URI says


CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def chromium() -> str:
    """The system Chromium; its absence is an install problem, said so (never a skip)."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    raise AssertionError("no Chromium on PATH: `make browser` installs Debian's (apt-get install chromium)")


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium; `evil.example` resolves to loopback in it (a DNS-rebinding attacker's name)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        args = ["--no-sandbox", "--host-resolver-rules=MAP evil.example 127.0.0.1"]
        browser = p.chromium.launch(executable_path=chromium(), headless=True, args=args)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def browser_page(browser):
    """One page of the headless Chromium."""
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.set_default_timeout(30_000)
    yield page
    page.close()


def csrf_token(url: str) -> str:
    """The CSRF token a UI's forms carry, read from its Play page as a browser would."""
    found = re.search(r'name="csrf" value="([^"]+)"', httpx.get(url + "/play", timeout=30).text)
    assert found, "the Play page's form carries no csrf field"
    return found.group(1)


def post_form(url: str, path: str, data: dict, **kwargs) -> httpx.Response:
    """POST a form as the UI's own page does: with its CSRF token and its own Origin."""
    headers = {"Origin": url, **kwargs.pop("headers", {})}
    return httpx.post(
        url + path, data={"csrf": csrf_token(url), **data}, headers=headers, timeout=60, **kwargs
    )
