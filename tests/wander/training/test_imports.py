"""wander.training has no import cycle: each module imports alone, and no chain of top-level imports loops."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3]
TRAINING = sorted(p.stem for p in (ROOT / "wander/training").glob("*.py") if p.stem != "__init__")


def imports(path: Path, lazy: bool) -> set[str]:
    """Modules of `envs` a file imports: on load, or also inside functions (`lazy`); never TYPE_CHECKING ones."""
    tree = ast.parse(path.read_text())
    skipped = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    nodes = ast.walk(tree) if lazy else iter(tree.body)
    found = set()
    for node in nodes:
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("envs"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("envs"))
    return found


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A loop of edges in `graph`, or None."""
    state: dict[str, str] = {}

    def visit(node: str, chain: list[str]) -> list[str] | None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return [*chain[chain.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt, [*chain, nxt])):
                return found
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node, [node])):
            return found
    return None


def test_no_cycle_among_envs_training_modules_even_through_lazy_imports():
    files = [p for p in (ROOT / "wander/training").glob("*.py") if p.stem != "__init__"]
    names = {module_name(p) for p in files}
    graph = {module_name(p): imports(p, lazy=True) & names for p in files}
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_no_cycle_among_load_time_imports_of_envs():
    files = list((ROOT / "envs").rglob("*.py"))
    names = {module_name(p) for p in files}
    graph = {module_name(p): (imports(p, lazy=False) & names) - {module_name(p)} for p in files}
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_the_cycle_finder_finds_the_old_cycle():
    old = {"rewards": {"compose"}, "compose": {"grpo"}, "grpo": {"rewards", "episode_data"}}
    assert find_cycle(old) == ["compose", "grpo", "rewards", "compose"]


@pytest.mark.parametrize("module", TRAINING)
def test_each_training_module_imports_alone_in_a_fresh_interpreter(module):
    done = subprocess.run(
        [sys.executable, "-c", f"import wander.training.{module}"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_training_operator_still_composes():
    code = (
        "from trl import GRPOConfig, GRPOTrainer\n"
        "from wander.training import trainer_spec\n"
        "from wander.training.compose import _builder\n"
        "from wander.training.grpo import grpo_trainer\n"
        "assert _builder(GRPOTrainer) is grpo_trainer\n"
        "from wander import load_environment\n"
        "env = load_environment('tictactoe')\n"
        "try:\n"
        "    env >> trainer_spec(GRPOTrainer)\n"
        "except TypeError as e:\n"
        "    assert 'needs a model' in str(e), e\n"
        "else:\n"
        "    raise AssertionError('composing without a model must fail')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
