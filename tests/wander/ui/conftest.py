"""A small pipeline run for `wander ui`, built cheaply: a tiny untrained model as the lineage's only checkpoint, a
real evaluation (wander.eval.evaluation.evaluate: the tiny model and two scripted rows, 2 games per cell), a stage
metrics file, and a real MLflow sqlite store with a stage run's per-step metrics and the model registered as the
`champion` version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

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
    params = {
        "env": {"name": "tictactoe", "tictactoe": ENV},
        "register": {"lineage": {"base": "data/models/base"}},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
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


@pytest.fixture(scope="module")
def run_root(tmp_path_factory) -> Path:
    """A project folder after a (tiny) pipeline run."""
    return build_run(tmp_path_factory.mktemp("run"))
