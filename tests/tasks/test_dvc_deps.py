"""dvc.yaml declares the stage code that shapes a stage's outputs: every tasks module it imports.

A stage's module and every `tasks` module reached from it through imports (at any depth, imports inside functions
included) must be a dep of the stage, so an edit there reruns it. Plumbing that cannot change what a stage writes
is exempt: atomic writes, logging, MLflow tracking, the stage runner, resume fingerprints and journals, validation
(it stops a stage, it never changes an output) and the params model (its values are tracked as params). The
library under `wander/` and the env folders under `envs/` are declared by hand (the env's folder, the policy and training modules a stage runs): its
import closure reaches every env through the registry.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PLUMBING = {
    "tasks/__init__.py",
    "tasks/plumbing/__init__.py",
    "tasks/plumbing/fingerprint.py",
    "tasks/plumbing/journal.py",
    "tasks/plumbing/params.py",
    "tasks/plumbing/recipe.py",
    "tasks/plumbing/yaml_file.py",
    "tasks/plumbing/sections.py",
    "tasks/plumbing/stage.py",
    "tasks/plumbing/tracking.py",
    "tasks/plumbing/validation.py",
}


def _module_file(name: str) -> str | None:
    """The repo-relative file of a `tasks` module or package, if it is one."""
    for path in (Path(*name.split(".")).with_suffix(".py"), Path(*name.split("."), "__init__.py")):
        if (ROOT / path).is_file():
            return path.as_posix()
    return None


def _tasks_imports(path: str) -> set[str]:
    """The `tasks` files a file imports, wherever the import statement stands."""
    names: set[str] = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    files = {_module_file(n) for n in names if n.split(".")[0] == "tasks"}
    return {f for f in files if f is not None}


def _tasks_closure(path: str) -> set[str]:
    """A file and every `tasks` file reachable from it through imports."""
    seen, todo = set(), [path]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(_tasks_imports(current))
    return seen


def _stages() -> dict[str, dict]:
    """dvc.yaml's stages, a foreach stage by its template."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    return {name: stage.get("do", stage) for name, stage in stages.items()}


@pytest.mark.parametrize("name", list(_stages()))
def test_a_stage_declares_the_tasks_code_it_runs(name):
    stage = _stages()[name]
    module = stage["cmd"].split(" -m ", 1)[1].split()[0]
    deps = {d for d in stage["deps"] if isinstance(d, str)}
    missing = sorted(_tasks_closure(_module_file(module)) - PLUMBING - deps)
    assert not missing, f"add {missing} to the deps of stage {name!r} in dvc.yaml"


def test_the_import_walk_follows_imports_inside_functions():
    # tasks/register.py imports tasks.plumbing.registered_model inside a function, and tasks.synthesize imports
    # tasks.generate, which imports tasks.plumbing.validation: placement and depth both count.
    assert "tasks/plumbing/registered_model.py" in _tasks_closure("tasks/register.py")
    assert {"tasks/generate.py", "tasks/plumbing/validation.py"} <= _tasks_closure("tasks/synthesize.py")
    assert "tasks/sft.py" not in _tasks_closure("tasks/register.py")
