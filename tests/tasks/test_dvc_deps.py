"""dvc.yaml declares exactly the stage code a stage runs, and a stage imports no other stage.

A stage's `tasks` files are its module and every `tasks` module reached from it through imports, at any depth,
imports inside functions included: the same walk as the resume fingerprint's (`fingerprint.code_files`). Each of
them must be a dep of the stage, so an edit there reruns it, and no other `tasks` file may be: an edit to a file a
stage does not run leaves it unchanged. Code that cannot change what a stage writes need not be declared:
atomic writes, logging, MLflow tracking, the stage runner, resume fingerprints and journals, validation (it stops
a stage, it never changes an output) and the params model (its values are tracked as params). What two stages
share lives in their run-time (`tasks/runtime/`) or in the library, never in a stage module: an edit to
`tasks/sft.py` reruns sft, not the GRPO stages. The library under `wander/` and the env folders under `envs/` are
declared by hand (the env's folder, the policy and training modules a stage runs): the walk reaches every env
through the registry.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tasks.runtime.fingerprint import code_files

ROOT = Path(__file__).resolve().parents[2]
# Code that cannot change what a stage writes: the params model (its values are tracked as params), the stage
# runner, its launcher of processes and its warm server, MLflow tracking, resume fingerprints and journals, validation.
UNDECLARED = {
    "tasks/__init__.py",
    *(f"tasks/params/{file.name}" for file in (ROOT / "tasks" / "params").glob("*.py")),
    "tasks/runtime/__init__.py",
    "tasks/runtime/fingerprint.py",
    "tasks/runtime/launch.py",  # the stage runner's launcher of a training stage's processes
    "tasks/runtime/stage.py",
    "tasks/runtime/stage_server.py",  # runs a stage command in a warm fork: the same code, the same files
    "tasks/runtime/tracking.py",
    "tasks/runtime/validation.py",
}


def _stages() -> dict[str, dict]:
    """dvc.yaml's stages, a foreach stage by its template."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    return {name: stage.get("do", stage) for name, stage in stages.items()}


def _module(stage: dict) -> str:
    """The module a stage's command runs (`tasks.sft`)."""
    return stage["cmd"].split(" -m ", 1)[1].split()[0]


def _file(module: str) -> str:
    """The repo-relative source file of a module."""
    return f"{module.replace('.', '/')}.py"


STAGE_FILES = {_file(_module(stage)) for stage in _stages().values()}


def _tasks_closure(module: str, root: Path = ROOT) -> set[str]:
    """The repo-relative `tasks` files a module runs: its own and every one it imports, at any depth."""
    files = {path.relative_to(root).as_posix() for path in code_files([module], root)}
    return {f for f in files if f.startswith("tasks/")}


def _stages_imported(module: str, root: Path = ROOT) -> set[str]:
    """The stage modules other than its own that a stage module runs through its imports."""
    return (_tasks_closure(module, root) & STAGE_FILES) - {_file(module)}


@pytest.mark.parametrize("name", list(_stages()))
def test_a_stage_declares_exactly_the_tasks_code_it_runs(name):
    stage = _stages()[name]
    runs = _tasks_closure(_module(stage))
    declared = {d for d in stage["deps"] if isinstance(d, str) and d.startswith("tasks/")}
    missing = sorted(runs - UNDECLARED - declared)
    assert not missing, f"add {missing} to the deps of stage {name!r} in dvc.yaml"
    extra = sorted(declared - runs)
    assert not extra, f"stage {name!r} does not run {extra}: remove them from its deps in dvc.yaml"


@pytest.mark.parametrize("name", list(_stages()))
def test_a_stage_imports_no_stage(name):
    module = _module(_stages()[name])
    imported = sorted(_stages_imported(module))
    assert not imported, (
        f"{_file(module)} imports the stage(s) {imported}: move what they share into tasks/runtime/ or wander/"
    )


def test_the_import_walk_follows_imports_inside_functions():
    # tasks/register.py imports tasks.runtime.registered_model inside a function, and tasks.synthesize imports
    # tasks.runtime.episode_specs, which imports tasks.runtime.validation: placement and depth both count.
    assert "tasks/runtime/registered_model.py" in _tasks_closure("tasks.register")
    assert {"tasks/runtime/episode_specs.py", "tasks/runtime/validation.py"} <= _tasks_closure(
        "tasks.synthesize"
    )
    assert "tasks/sft.py" not in _tasks_closure("tasks.register")


@pytest.mark.parametrize(
    "statement",
    [
        "from tasks.sft import trainer_args",
        "import tasks.sft",
        "from tasks import sft",
        "def run():\n    from tasks.sft import trainer_args\n",
        "from tasks.runtime.shared import helper",  # through a run-time module that imports the stage
    ],
)
def test_a_stage_importing_a_stage_is_found(tmp_path: Path, statement: str) -> None:
    for path, text in {
        "tasks/__init__.py": "",
        "tasks/runtime/__init__.py": "",
        "tasks/runtime/shared.py": "def helper():\n    from tasks.sft import trainer_args\n",
        "tasks/sft.py": "def trainer_args(): ...\n",
        "tasks/grpo.py": f"{statement}\n",
    }.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert _stages_imported("tasks.grpo", tmp_path) == {"tasks/sft.py"}
    assert _stages_imported("tasks.sft", tmp_path) == set()
