"""An edit to a stage's module changes that stage only in `dvc status`, on a scratch copy of the project.

No stage runs: every output is a placeholder file and `dvc commit` records the pipeline as it stands, so
`dvc status` reports exactly the stages whose own deps an edit touches (its downstream stages follow only when its
outputs change). `tests/tasks/test_dvc_deps.py` checks the same statically, from the imports.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tasks.runtime.scratch_copy import copy_project, project_env, run_in

ROOT = Path(__file__).resolve().parents[2]
EDIT = "\n# an edit\n"


def _stage_modules() -> dict[str, str]:
    """dvc.yaml's stages (a foreach stage by its template name), each with the module file its command runs."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    return {
        name: stage.get("do", stage)["cmd"].split(" -m ", 1)[1].split()[0].replace(".", "/") + ".py"
        for name, stage in stages.items()
    }


def changed(repo: Path) -> set[str]:
    """The stages `dvc status` reports changed (`sft`, `grpo`, ...)."""
    done = subprocess.run(
        ["dvc", "status", "--json"],
        cwd=repo,
        env=project_env(repo),
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(done.stdout or "{}"))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch copy of the project whose every stage output is a placeholder, committed: nothing is changed."""
    from dvc.repo import Repo

    root = copy_project(tmp_path_factory.mktemp("repo"))
    with Repo(str(root)) as dvc:
        for stage in dvc.index.stages:
            for out in stage.outs:
                path = Path(out.fs_path)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(f"{out.def_path}\n")
    run_in(root, ["dvc", "commit", "--force", "--quiet"])
    assert changed(root) == set()
    return root


@pytest.mark.slow
def test_editing_the_sft_stage_leaves_every_grpo_stage_unchanged(repo: Path) -> None:
    module = repo / "tasks" / "sft.py"
    source = module.read_text()
    try:
        module.write_text(source + EDIT)
        assert changed(repo) == {"sft"}
    finally:
        module.write_text(source)
    assert changed(repo) == set()


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(set(_stage_modules().values())))
def test_editing_a_stage_module_changes_only_the_stages_that_run_it(repo: Path, module: str) -> None:
    runs = {name for name, file in _stage_modules().items() if file == module}
    path = repo / module
    source = path.read_text()
    try:
        path.write_text(source + EDIT)
        assert {name.split("@")[0] for name in changed(repo)} == runs
    finally:
        path.write_text(source)
