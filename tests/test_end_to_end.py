"""The list of end-to-end modules (tests/end_to_end.py) is the suite's own: every module that chains stages is on it,
every entry is a test module that does, and each says why."""

from __future__ import annotations

import re
from pathlib import Path

from tests.end_to_end import END_TO_END

REPO = Path(__file__).resolve().parents[1]
# A test that starts a pipeline: DVC over several stages, the shared per-env run, a flow run by a deployment.
RUNS_STAGES = re.compile(
    r'"dvc", "repro"|"dvc", "exp", "run"|smoke_pipeline\(\w|smoke_pipeline\("|run_deployment\(|"deployment", "run"'
)


def runs_stages(source: str) -> bool:
    """Whether a test module's source starts a pipeline of several stages."""
    return bool(RUNS_STAGES.search(source))


def suite_modules(root: Path = REPO) -> dict[str, str]:
    """Every test module of the suite (tests/ and the envs' own), by path from the root."""
    paths = [*(root / "tests").rglob("test_*.py"), *(root / "envs").rglob("test_*.py")]
    return {str(p.relative_to(root)): p.read_text() for p in sorted(paths) if p != Path(__file__)}


def test_every_module_that_runs_a_pipeline_is_listed_with_a_reason():
    modules = suite_modules()
    running = {path for path, source in modules.items() if runs_stages(source)}
    assert running - set(END_TO_END) == set(), (
        "add them to tests/end_to_end.py, with why each must run stages"
    )
    for path, why in END_TO_END.items():
        assert path in modules, f"{path}: no such test module"
        assert path in running, f"{path} runs no pipeline: take it off the list"
        assert len(why) > 30, f"{path}: say why it must run a pipeline"


def test_the_check_finds_a_pipeline_and_passes_a_module_that_runs_one_stage_process():
    assert runs_stages('out = run_in(root, ["dvc", "exp", "run", "-S", "env.name=x"])')
    assert runs_stages('first = sh(["dvc", "repro", "curate"], repo)')  # curate's upstream stages with it
    assert runs_stages('root = smoke_pipeline("chess")') and runs_stages(
        "root = smoke_pipeline(pipeline_env)"
    )
    assert runs_stages('prefect("deployment", "run", "wander-pipeline/manual", "--watch")')
    assert not runs_stages('subprocess.run([sys.executable, "-m", "tasks.sft", "--params", p])')
