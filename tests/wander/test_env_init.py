"""`wander env init NAME`: a new environment folder that works with no edit outside it (issue 29's acceptance).

The fast tests scaffold into a bare folder holding only the `envs` package; the slow one does exactly what the issue
asks, in a scratch copy of the project: init, the env's own test, `wander eval`, the smoke pipeline, `git status`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tasks.params.shared_sections import Env
from tasks.runtime.scratch_copy import copy_project, run_in
from wander import scaffold
from wander.cli import main

PROJECT = Path(__file__).resolve().parents[2]
FILES = {"__init__.py", "README.md", "recipe.yaml"}


@pytest.fixture
def catalogue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bare project folder holding the `envs` package only, as the working directory."""
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs/__init__.py").write_text((PROJECT / "envs/__init__.py").read_text())
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """A command in `cwd`, its output captured."""
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_every_kind_scaffolds_a_lint_clean_env_whose_own_test_passes(catalogue: Path) -> None:
    names = {kind: f"{kind.replace('-', '_')}_starter" for kind in scaffold.KINDS}
    for kind, name in names.items():
        assert main(["env", "init", name, "--kind", kind]) == 0
        assert {p.name for p in (catalogue / "envs" / name).iterdir()} == FILES | {f"test_{name}.py"}
    assert sorted(p.name for p in (catalogue / "envs").iterdir()) == sorted([*names.values(), "__init__.py"])
    # The project's ruff settings, as `make lint` applies them to envs/.
    config = ["--config", str(PROJECT / "pyproject.toml")]
    lint = run([sys.executable, "-m", "ruff", "check", *config, "envs"], catalogue)
    assert lint.returncode == 0, lint.stdout
    form = run([sys.executable, "-m", "ruff", "format", "--check", *config, "envs"], catalogue)
    assert form.returncode == 0, form.stdout
    # `python -m`: the working directory comes first on sys.path, so `envs` is this folder's catalogue.
    tests = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "envs"], catalogue)
    assert tests.returncode == 0 and tests.stdout.splitlines()[-1].startswith("36 passed"), tests.stdout[
        -3000:
    ]


def test_the_readme_says_how_to_run_the_env(catalogue: Path) -> None:
    assert main(["env", "init", "lockers", "--kind", "tool"]) == 0
    readme = (catalogue / "envs/lockers/README.md").read_text()
    assert readme.startswith("# lockers\n") and "open_locker" in readme
    for command in ("pytest envs/lockers", "wander eval --env lockers", "dvc exp run -S env.name=lockers"):
        assert command in readme


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("Demo", "lowercase letters"),
        ("2fast", "starts with a letter"),
        ("my-env", "lowercase letters, digits and underscores"),
        ("class", "not a keyword"),
        ("name", "a key of params.yaml's env section"),
        ("url", "a key of params.yaml's env section"),
        ("json", "importable Python module"),
        ("torch", "importable Python module"),
        ("wander", "importable Python module"),
    ],
)
def test_a_bad_name_is_refused_before_anything_is_written(
    catalogue: Path, name: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["env", "init", name]) == 2
    assert why in capsys.readouterr().err
    assert [p.name for p in (catalogue / "envs").iterdir()] == ["__init__.py"]


def test_an_existing_env_is_never_replaced(catalogue: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env", "init", "demo"]) == 0
    folder = catalogue / "envs/demo"
    (folder / "notes.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert main(["env", "init", "demo", "--kind", "tool"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_outside_the_project_root_nothing_is_written(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["env", "init", "demo"]) == 2
    assert "from the project's root folder" in capsys.readouterr().err and not any(tmp_path.iterdir())


def test_a_failed_write_leaves_no_folder_and_no_debris(catalogue: Path, monkeypatch) -> None:
    def half_written(name: str, kind: str) -> dict[str, str]:
        return {"__init__.py": "", "missing/sub/folder.py": ""}  # the second write fails: no such folder

    monkeypatch.setattr(scaffold, "render", half_written)
    with pytest.raises(FileNotFoundError):
        scaffold.init_environment("demo")
    assert [p.name for p in (catalogue / "envs").iterdir()] == ["__init__.py"]


def test_the_reserved_names_are_the_env_sections_own_keys() -> None:
    # An env named like a field of params.yaml's `env` section could have no `env.<name>` block.
    assert scaffold.RESERVED == set(Env.model_fields)


def project_status(root: Path) -> set[str]:
    """`git status --porcelain` of the scratch project, one entry per line."""
    return set(run_in(root, ["git", "status", "--porcelain"]).splitlines())


@pytest.mark.slow
def test_a_scaffolded_env_passes_its_test_eval_and_the_smoke_pipeline_with_no_edit_elsewhere(
    tmp_path: Path,
) -> None:
    root = copy_project(tmp_path / "project", profile="smoke")
    assert "created envs/demo/" in run_in(root, [sys.executable, "-m", "wander.cli", "env", "init", "demo"])
    assert project_status(root) == {"?? envs/demo/"}

    out = run_in(root, [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "envs/demo"])
    assert "\n12 passed in " in out

    run_in(
        root, [sys.executable, "-m", "wander.cli", "eval", "--env", "demo", "--games", "4", "--no-progress"]
    )
    report = root / "data/eval-adhoc"
    assert (report / "report.md").is_file()
    assert json.loads((report / "metrics.json").read_text())["expert"]["reward"]["all"] == 1.0
    rows = (report / "matrix.csv").read_text().splitlines()
    assert {tuple(r.split(",")[1:3]) for r in rows[1:]} == {
        (f"stratum-{k}", side) for k in range(4) for side in ("eval", "test")
    }

    run_in(root, ["dvc", "exp", "run", "-S", "env.name=demo"])
    assert yaml.safe_load((root / "params.yaml").read_text())["env"]["name"] == "demo"
    for stage in ("build_model", "generate", "synthesize", "curate", "sft", "grpo", "register"):
        assert json.loads((root / "data/metrics" / f"{stage}.json").read_text()), stage
    # The env's own curriculum, as its recipe names it: one stage, one model.
    assert list(json.loads((root / "data/metrics/grpo.json").read_text())) == ["grpo-main"]
    assert [p.name for p in (root / "data/models/grpo").iterdir()] == ["main"]
    synth = json.loads((root / "data/metrics/synthesize.json").read_text())
    assert 0.6 < synth["teacher_reward"] < 1.0  # the embedded teacher slips on a fifth of the questions
    sft_rows = (root / "data/sft/train.jsonl").read_text().splitlines()
    assert sft_rows and all("<answer>" in row for row in sft_rows)  # curate kept the teacher's answers
    headline = json.loads((root / "data/eval/metrics.json").read_text())
    assert set(headline) == {"grpo-main", "teacher"}
    assert 0.6 <= headline["teacher"]["reward"]["all"] <= 1.0
    assert 0.0 <= headline["grpo-main"]["reward"]["all"] <= 1.0
    assert json.loads((root / "data/metrics/register.json").read_text())["version"] == 1
    # Nothing outside the env's folder changed but what `dvc exp run -S` itself writes: the param and the lock.
    assert project_status(root) == {"?? envs/demo/", " M params.yaml", "?? dvc.lock"}
