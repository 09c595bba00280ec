"""`wander env init NAME`: a new environment folder under envs/, working from the start (factory, rubric, scripted
teacher, README, test, training recipe), rendered from the templates beside this module. Discovery finds it by its
folder name, so adding an environment edits nothing outside its folder."""

from __future__ import annotations

import importlib.util
import keyword
import re
import sys
from importlib.resources import files
from pathlib import Path
from string import Template

from wander.core.atomic_io import atomic_dir
from wander.core.registry import environment_names

KINDS = {"single-turn": "single_turn.py.tmpl", "multi-turn": "multi_turn.py.tmpl", "tool": "tool.py.tmpl"}
"""The kinds of starter environment and the template of each one's `__init__.py`."""
DEFAULT_KIND = "single-turn"
TASKS = {
    "single-turn": "Its starter task: answer the number in the prompt plus one, in `<answer>`.",
    "multi-turn": "Its starter task: count on from a number, one step a turn, the environment correcting each "
    "answer.",
    "tool": "Its starter task: open the lockers the user names with the `open_locker` tool and answer their sum.",
}
"""One sentence per kind for the README: what its starter task is."""
RESERVED = frozenset({"name", "url"})
"""Keys of params.yaml's `env` section besides the per-environment blocks: an env with one of these names would have
no block of its own (`env.<name>`)."""
NAME = re.compile(r"[a-z][a-z0-9_]*")


def check_name(name: str, envs_dir: Path) -> None:
    """Raise ValueError saying why `name` cannot be a new environment in `envs_dir`, and what to do instead."""
    if not NAME.fullmatch(name) or keyword.iskeyword(name):
        raise ValueError(
            f"{name!r} cannot name an environment: use a Python identifier of lowercase letters, digits and "
            "underscores that starts with a letter and is not a keyword (e.g. word_count)"
        )
    if name in RESERVED:
        raise ValueError(
            f"{name!r} is a key of params.yaml's env section ({', '.join(sorted(RESERVED))}); pick another name"
        )
    if is_module(name):
        raise ValueError(
            f"{name!r} is also the name of an importable Python module, which `load_environment({name!r})` and "
            "imports would confuse with the environment; pick another name"
        )
    if not (envs_dir / "__init__.py").is_file():
        raise ValueError(
            f"{envs_dir} is not the environments package (no {envs_dir / '__init__.py'}); run `wander env init` "
            "from the project's root folder, the one holding envs/"
        )
    folder = envs_dir / name
    if folder.exists():
        # Never replaced: an environment folder holds someone's work, and a scaffold is cheap to make elsewhere.
        raise ValueError(f"{folder} already exists; pick another name (or delete that folder yourself first)")
    if name in environment_names() and not folder.exists():
        raise ValueError(
            f"an environment named {name!r} already exists elsewhere in the catalogue; pick another name"
        )


def is_module(name: str) -> bool:
    """Whether a top-level Python module of that name exists (standard library, installed or on the path)."""
    if name in sys.stdlib_module_names or name in sys.modules:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a module that exists but cannot say where it is
        return True


def render(name: str, kind: str) -> dict[str, str]:
    """The files of a new environment `name` of `kind`: relative path -> text."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
    templates = files(__package__) / "templates"
    values = {
        "name": name,
        "title": name.replace("_", " ").capitalize(),
        "class_prefix": "".join(part.capitalize() for part in name.split("_")),
        "kind": kind,
        "task": TASKS[kind],
    }
    sources = {
        "__init__.py": KINDS[kind],
        "README.md": "README.md.tmpl",
        f"test_{name}.py": "test_env.py.tmpl",
        "recipe.yaml": "recipe.yaml.tmpl",  # the pipeline's task-dependent params (tasks/params/recipe.py)
    }
    return {
        path: Template((templates / source).read_text(encoding="utf-8")).substitute(values)
        for path, source in sources.items()
    }


def init_environment(name: str, kind: str = DEFAULT_KIND, envs_dir: Path | str = "envs") -> Path:
    """Write the new environment folder `envs_dir/name` whole (rendered in a temp folder, then renamed); its path."""
    envs_dir = Path(envs_dir)
    check_name(name, envs_dir)
    rendered = render(name, kind)
    folder = envs_dir / name
    with atomic_dir(folder) as tmp:
        for path, text in rendered.items():
            (tmp / path).write_text(text, encoding="utf-8")
    return folder
