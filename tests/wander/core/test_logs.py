"""The log switch: other libraries' INFO lines and progress bars quiet by default, back with --verbose or
WANDER_LOG_LEVEL=DEBUG."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wander.core.logs import (
    CHATTY,
    DATASETS_PROGRESS_ENV,
    LEVEL_ENV,
    OURS,
    PROGRESS_ENV,
    QUIET_ENV,
    configure_logging,
)
from wander.core.offline import OFFLINE_ENV

REPO = Path(__file__).resolve().parents[3]

NAMES = ["", *OURS, *CHATTY, "stage", "some.library"]


@pytest.fixture(autouse=True)
def restore_levels(monkeypatch):
    for name in (
        PROGRESS_ENV,
        DATASETS_PROGRESS_ENV,
        *QUIET_ENV,
    ):  # configure_logging sets them: put them back afterwards
        monkeypatch.delenv(name, raising=False)
    levels = {n: logging.getLogger(n).level for n in NAMES}
    bars = sys.modules.get("transformers.utils.logging")
    shown = bars.is_progress_bar_enabled() if bars else None
    datasets_bars = sys.modules.get("datasets.utils.tqdm")
    datasets_shown = not datasets_bars.are_progress_bars_disabled() if datasets_bars else None
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    if shown:
        bars.enable_progress_bar()
    if datasets_shown:
        datasets_bars.enable_progress_bars()


@pytest.mark.parametrize(
    ("env", "verbose", "ours", "others"),
    [
        (None, False, logging.INFO, logging.WARNING),
        ("nonsense", False, logging.INFO, logging.WARNING),
        (None, True, logging.INFO, logging.INFO),
        ("debug", False, logging.DEBUG, logging.DEBUG),
        ("WARNING", False, logging.WARNING, logging.WARNING),
        ("ERROR", True, logging.ERROR, logging.ERROR),
    ],
)
def test_levels(monkeypatch, env, verbose, ours, others):
    if env is None:
        monkeypatch.delenv(LEVEL_ENV, raising=False)
    else:
        monkeypatch.setenv(LEVEL_ENV, env)
    assert configure_logging("stage", verbose) == ours
    assert {logging.getLogger(n).getEffectiveLevel() for n in (*OURS, "stage", "tasks.sft")} == {ours}
    logging.getLogger("uvicorn.access").setLevel(logging.INFO)  # as uvicorn's own log config leaves it
    configure_logging("stage", verbose)
    assert {logging.getLogger(n).getEffectiveLevel() for n in (*CHATTY, "some.library")} == {others}


LOAD = """
import sys
if {import_first}:
    import transformers.utils.logging  # a stage that imported transformers before setting up its logs
from wander.core.logs import configure_logging
configure_logging("stage", verbose={verbose})
from wander.policies.scratch_model import load_model
load_model(sys.argv[1], device="cpu")
"""


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-layer Llama of a few thousand parameters, saved the ordinary way."""
    from transformers import LlamaConfig, LlamaForCausalLM

    path = tmp_path_factory.mktemp("tiny")
    config = LlamaConfig(
        vocab_size=32, hidden_size=8, intermediate_size=16, num_hidden_layers=2, num_attention_heads=2
    )
    LlamaForCausalLM(config).save_pretrained(path)
    return path


def clean_env() -> dict[str, str]:
    """This process's environment without the switches under test (a stage starts without them)."""
    return {k: v for k, v in os.environ.items() if k not in (PROGRESS_ENV, DATASETS_PROGRESS_ENV, LEVEL_ENV)}


@pytest.mark.parametrize("import_first", [False, True])
@pytest.mark.parametrize("verbose", [False, True])
def test_the_loading_weights_bar_shows_only_when_verbose(tiny_model: Path, verbose: bool, import_first: bool):
    done = subprocess.run(
        [sys.executable, "-c", LOAD.format(verbose=verbose, import_first=import_first), str(tiny_model)],
        cwd=REPO,
        env={**clean_env(), "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("Loading weights" in done.stderr) == verbose, done.stderr[-2000:]


TOKENIZE = """
if {import_first}:
    import datasets  # SFT imports TRL, hence datasets, before its logs are set up
from wander.core.logs import configure_logging
configure_logging("stage", verbose={verbose})
from datasets import Dataset
Dataset.from_dict({{"a": list(range(50))}}).map(lambda row: row, desc="Tokenizing train dataset")
"""


@pytest.mark.parametrize("import_first", [False, True])
@pytest.mark.parametrize("verbose", [False, True])
def test_the_datasets_bars_show_only_when_verbose(verbose: bool, import_first: bool):
    done = subprocess.run(
        [sys.executable, "-c", TOKENIZE.format(verbose=verbose, import_first=import_first)],
        cwd=REPO,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("Tokenizing train dataset" in done.stderr) == verbose, done.stderr[-2000:]


NOTICES = """
import os, warnings
from wander.core.logs import configure_logging
configure_logging("stage", verbose={verbose})
warnings.warn("`is_gradient_checkpointing` is deprecated and will be removed in v6.", FutureWarning)
warnings.warn("a real problem: the checkpoint has no tokenizer", UserWarning)
print("TRL_EXPERIMENTAL_SILENCE=" + os.environ.get("TRL_EXPERIMENTAL_SILENCE", "unset"))
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_library_notices_that_ask_nothing_are_off_and_a_real_warning_still_shows(verbose: bool):
    done = subprocess.run(
        [sys.executable, "-c", NOTICES.format(verbose=verbose)],
        cwd=REPO,
        env={k: v for k, v in clean_env().items() if k not in QUIET_ENV},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "a real problem: the checkpoint has no tokenizer" in done.stderr
    assert ("is_gradient_checkpointing" in done.stderr) == verbose
    assert ("TRL_EXPERIMENTAL_SILENCE=1" in done.stdout) == (not verbose)


def test_a_flow_or_stage_started_from_a_shell_sends_no_telemetry():
    # `python -m flows.pipeline` or a stage outside make: the switches are set before any tool starts; a caller's
    # own value wins.
    env = {k: v for k, v in os.environ.items() if k not in OFFLINE_ENV}
    env["HF_HUB_OFFLINE"] = "0"
    for package in ("flows", "tasks"):
        done = subprocess.run(
            [sys.executable, "-c", f"import json, os, {package}; print(json.dumps(dict(os.environ)))"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout)
        assert {k: seen[k] for k in OFFLINE_ENV} == {**OFFLINE_ENV, "HF_HUB_OFFLINE": "0"}, package


def test_a_flow_s_new_mlflow_store_is_created_without_mlflow_s_info_lines(tmp_path):
    # The flow process opens the pipeline's run in a store it may create: MLflow's INFO about its tables is off,
    # as in the stages (QUIET_ENV), unless the environment says otherwise.
    code = "import flows; from tasks.runtime.tracking import setup; import sys; setup(sys.argv[1])"
    for env, shown in (({}, False), ({"MLFLOW_LOGGING_LEVEL": "INFO"}, True)):
        done = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / str(shown))],
            cwd=REPO,
            env={**{k: v for k, v in clean_env().items() if k not in QUIET_ENV}, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert ("Creating initial MLflow database tables" in done.stderr) == shown, done.stderr[-2000:]
