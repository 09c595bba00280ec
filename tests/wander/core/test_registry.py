"""Things found by name: one Registry pattern, filled by the layer that owns each thing; the core names no layer above."""

import ast
import configparser
import re
import subprocess
import sys
from pathlib import Path

import pytest

from wander.core.registry import CATALOGUES, ENVIRONMENT_SCHEMES, Registry, environment_names, module_name

ROOT = Path(__file__).resolve().parents[3]


def test_a_registry_maps_names_and_refuses_a_second_owner():
    registry: Registry[int] = Registry("number")
    one, two = object(), object()
    assert registry.register("b", one) is one and registry.register("a", two) is two
    assert registry.register("b", one) is one  # the same item again: a no-op (a module imported twice)
    assert registry.names() == ["a", "b"] and list(registry) == ["b", "a"]
    assert registry.get("a") is two and registry.get("c") is None and "a" in registry and "c" not in registry
    with pytest.raises(ValueError, match="number 'a' is already registered"):
        registry.register("a", one)


def test_the_catalogue_and_openenv_are_registered_at_the_packages_entry():
    assert "envs" in CATALOGUES and "tictactoe" in environment_names()
    assert module_name("tictactoe") == "envs.tictactoe" and module_name("some.module") == "some.module"
    assert ENVIRONMENT_SCHEMES.get("openenv") is not None


def test_any_entry_point_finds_openenv_without_importing_the_server():
    """A fresh interpreter that imports only the core's registry (as a stage or the UI might first) resolves
    `openenv:` names, and the served env's modules load only when one is used."""
    code = (
        "import sys\n"
        "from wander.core.registry import ENVIRONMENT_SCHEMES, load_environment\n"
        "assert 'wander.serve.served' not in sys.modules\n"
        "try:\n"
        "    load_environment('openenv:http://127.0.0.1:9', timeout_s=2)\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
        "assert 'wander.serve.served' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def upper_layers() -> list[str]:
    """Every layer of .importlinter's contract above wander.core."""
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    layers = config["importlinter:contract:pipeline-layers"]["layers"].split()
    return [name for name in layers if name not in ("|", "wander.core")]


LOGGER_NAMES = {("logs.py", "envs"), ("logs.py", "tasks"), ("logs.py", "flows")}
"""Strings that are the project's logger names (`logs.OURS`: whose records are ours), not modules to import."""


def test_the_core_names_no_upper_layer_in_a_string():
    """No import string reaches up (`"wander.serve.served:load_remote"`): what the core finds by name, the layer
    that owns it registers. Docstrings may mention other layers; code strings may not."""
    layers = upper_layers()
    assert {"wander.serve", "wander.policies", "envs", "tasks", "flows"} <= set(layers)
    named = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, layers)) + r")(?=$|[.:][A-Za-z_])")
    found = []
    for path in sorted((ROOT / "wander" / "core").glob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if named.search(node.value) and (path.name, node.value) not in LOGGER_NAMES:
                    found.append(f"{path.name}:{node.lineno}: {node.value!r}")
            if isinstance(node, ast.ImportFrom | ast.Import):
                modules = (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                )
                found += [f"{path.name}:{node.lineno}: import {m}" for m in modules if named.match(m)]
    assert not found, "wander/core names an upper layer:\n" + "\n".join(found)
