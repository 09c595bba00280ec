"""Each piece of knowledge in one room (issue 45): params files are read through the params model alone, and the
flows name no environment and no metric of one.

Both are read from the source, so a new module is checked without a test of its own.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

from wander.core.evaluation_suite import MATRIX
from wander.core.registry import environment_names, load_environment

REPO = Path(__file__).resolve().parents[1]
CODE = ("wander", "tasks", "flows", "envs")
YAML_LIBRARIES = ("yaml", "ruamel")

# The modules that may import a YAML library, each with the reason. Every params file (params.yaml, a profile, an env's
# recipe) is read and written through the params model alone (tasks.params.load: read_params, load_params,
# write_params), the UI included: `python -m flows.ui` loads the params and hands `wander ui` typed values.
YAML_ALLOWED = {
    # The params model's file format: params.yaml, its profiles, the envs' recipes and dvc.lock read as DVC reads
    # them (PyYAML with YAML 1.2's floats), a derived params file written (yaml_text), and params.yaml edited in place
    # with its comments kept (ruamel.yaml's round trip), as `dvc exp run -S` does.
    "tasks/params/yaml_file.py",
    # `wander eval --set KEY=VALUE`: one command-line value read as YAML (docs/evaluation.md), not a file; the
    # library's command line sits below the params model (.importlinter) and cannot call it.
    "wander/cli/arguments.py",
}


def yaml_importers() -> set[str]:
    """Every module under CODE that imports a YAML library, at any depth (lazy imports included)."""
    found = set()
    for folder in CODE:
        for path in sorted((REPO / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                if any(n.split(".")[0] in YAML_LIBRARIES for n in names):
                    found.add(str(path.relative_to(REPO)))
    return found


def test_only_the_params_model_imports_a_yaml_library():
    assert yaml_importers() - YAML_ALLOWED == set()
    assert YAML_ALLOWED - yaml_importers() == set()  # an entry nobody needs any more goes


def game_words() -> set[str]:
    """Every env's name and the metrics of every game (a matrix suite), with the worst-case result's keys."""
    words = set(environment_names())
    for name in environment_names():
        suite = load_environment(name).evaluation_suite()
        if suite.kind == MATRIX:
            words |= set(suite.names)
    return words | {"worst_case", "sound", "outcome"}


def code_words(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each name and string literal of a module: its code, not its comments."""
    kinds = {tokenize.NAME, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    source = io.StringIO(path.read_text(encoding="utf-8")).readline
    return [(t.start[0], t.string) for t in tokenize.generate_tokens(source) if t.type in kinds]


def test_the_flows_name_no_environment_and_no_metric_of_one():
    # A flow passes typed params down and prints what the suite's report writes: no env's name, no game's metric
    # (or worst-case key) in its code. The params model (tasks/params/training_sections.py) is not checked here yet: its
    # curriculum is moving to the envs' recipes.
    words = game_words()
    assert {"tictactoe", "win", "loss", "draw", "non_loss"} <= words
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, words))) + r")\b")
    hits = [
        f"{path.relative_to(REPO)}:{line}: {text}"
        for path in sorted((REPO / "flows").glob("*.py"))
        for line, text in code_words(path)
        if pattern.search(text)
    ]
    assert hits == []
