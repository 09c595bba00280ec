"""Shared fixtures of the stage tests: the smoke profile with every path under a temporary folder."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tasks.params.load import load_params, read_params, restrict
from tasks.params.sections import Params

REPO = Path(__file__).resolve().parents[2]


def smoke_params(root: Path) -> dict:
    """params.yaml with the smoke profile merged and the layout moved under `root`."""
    params = read_params(REPO / "params.yaml", profile="smoke")
    params["layout"] = {key: str(root / value) for key, value in params["layout"].items()}
    return params


def config(stage: str, params: dict, **overrides: object) -> Params:
    """The checked params a stage gets (its sections only), some keys of its section overridden; a key of a
    nested config (e.g. synthesize.teacher's max_retries) is found there."""
    section = copy.deepcopy(params[stage])
    for key, value in overrides.items():
        nested = [v for v in section.values() if isinstance(v, dict) and key in v and key not in section]
        (nested[0] if nested else section)[key] = value
    return restrict(load_params(params={**params, stage: section}), stage)


def write_params(path: Path, params: dict) -> Path:
    """Write a params file a stage's command line can read."""
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


@pytest.fixture(scope="session")
def params_at():
    """`smoke_params` as a fixture: tests call it with their own root."""
    return smoke_params


@pytest.fixture(scope="session")
def stage_config():
    """`config` as a fixture: a stage's config from params with overrides."""
    return config


@pytest.fixture(scope="session")
def pipeline_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder the session's shared stage outputs are written to (read-only for tests: copy before changing)."""
    return tmp_path_factory.mktemp("pipeline")


@pytest.fixture(scope="session")
def shared_params(pipeline_root: Path) -> dict:
    """Smoke params pointing into the session's shared folder."""
    return smoke_params(pipeline_root)


@pytest.fixture(scope="session")
def generated(shared_params: dict) -> dict:
    """The generate stage's metrics, its outputs in the shared folder."""
    from tasks import generate

    return generate.run(config("generate", shared_params))


@pytest.fixture(scope="session")
def base_model(shared_params: dict) -> Path:
    """The smoke scratch model in the shared folder."""
    from tasks import build_model

    build_model.run(config("build_model", shared_params))
    return Path(shared_params["layout"]["base_model"])


@pytest.fixture(scope="session")
def synthesized(shared_params: dict, generated: dict) -> dict:
    """The synthesize stage's metrics (embedded teacher), its episodes in the shared folder."""
    from tasks import synthesize

    return synthesize.run(config("synthesize", shared_params))
