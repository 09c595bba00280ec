"""`python -m flows.ui` (`make app`): the UI of the project's run, told of it through the params model. The lineage
params.yaml leaves to the GRPO curriculum, a profile's registered model name, the env's settings and the layout's
metrics folder reach the pages of a real server; params the model refuses and a bad serving option of `wander ui`
stop it with one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import httpx

from flows.ui import run_config
from tasks.params.load import load_params

from ..wander.fuzz_http import cli_server

REPO = Path(__file__).resolve().parents[2]
PROFILE = "ui"  # params.ui.yaml, written by `project`: the registered model's name
MODEL_NAME = "wander-ui-test"


def project(root: Path) -> Path:
    """The project's params.yaml, a profile naming the registered model, and one stage's headline metrics; returns
    the params file."""
    shutil.copy(REPO / "params.yaml", root / "params.yaml")
    (root / f"params.{PROFILE}.yaml").write_text(f"register:\n  model_name: {MODEL_NAME}\n", encoding="utf-8")
    (root / "data/metrics").mkdir(parents=True)
    (root / "data/metrics/build_model.json").write_text(json.dumps({"parameters": 123}), encoding="utf-8")
    # The grpo stage's headline: one per curriculum stage, by model row.
    parts = {"grpo-wide": {"steps": 41}, "grpo-polish": {"steps": 83}}
    (root / "data/metrics/grpo.json").write_text(json.dumps(parts), encoding="utf-8")
    return root / "params.yaml"


def test_the_ui_is_told_of_the_run_by_the_params_model(tmp_path):
    params_file = project(tmp_path)
    params = load_params(params_file, PROFILE)
    run = run_config(params_file, PROFILE)
    assert run.root == tmp_path.resolve()  # the folders the params name are relative to their file's folder
    # The lineage as loaded (params.yaml may leave it to the GRPO curriculum), base first, in training order.
    assert run.lineage == params.register.lineage and list(run.lineage)[:2] == ["base", "sft"]
    assert len(run.lineage) > 2 and run.model_name == MODEL_NAME
    assert (
        run.env == params.env.kwargs() and run.env_name == params.env.name
    )  # settings as the env reads them
    assert (run.eval_dir, run.metrics_dir) == (params.evaluate.out_dir, params.layout.metrics)


def test_the_project_ui_serves_what_its_params_say(tmp_path):
    params_file = project(tmp_path)
    params = load_params(params_file, PROFILE)
    args = ["--params", str(params_file), "--profile", PROFILE, "--seed", "3"]
    with cli_server(args, "/play", module="flows.ui") as (url, _):
        play = httpx.get(url + "/play", timeout=30).text
        curves = httpx.get(url + "/curves", timeout=30).text
    assert f'name="env" value="{params.env.name}"' in play
    for name in params.register.lineage:
        assert f'<option value="{name}">' in play and f"data-stage='{name}'" in curves
    assert f"Registered versions of {MODEL_NAME}" in curves
    # Handed a tracking store (MLflow's client on the project's store, none made yet here): read, not missing.
    assert f"No registered version in sqlite:///{tmp_path.resolve()}/mlflow/mlflow.db" in curves
    assert "no tracking store connected" not in curves.lower() and not (tmp_path / "mlflow").exists()
    assert "parameters 123" in curves  # the base's stage metrics, from the layout's metrics folder
    # Each curriculum stage's node shows its own headline, from the grpo stage's one metrics file.
    for row, steps in (("grpo-wide", 41), ("grpo-polish", 83)):
        node = curves[curves.index(f"data-stage='{row}'") :]
        assert f"steps {steps}" in node[: node.index("</div>")], row


def test_refused_params_and_options_stop_it_in_one_line(tmp_path):
    params_file = project(tmp_path)
    cases = {
        ("--profile", "nosuch"): "no profile 'nosuch'",
        ("--api-key-endpoint", "api.openai.com"): "'api.openai.com' is not an http:// or https:// URL",
    }
    for extra, message in cases.items():
        done = subprocess.run(
            [sys.executable, "-m", "flows.ui", "--params", str(params_file), *extra, "--port", "0"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2 and message in done.stderr, done.stderr[-2000:]
        assert done.stderr.startswith("ui: error:") and "Traceback" not in done.stderr
