"""dvc.yaml tracks whole params sections: changing any key marks exactly the stages that read its section.

A scratch copy of the repo gets placeholder deps and outs and a committed dvc.lock (no stage runs); then every key
of every section is changed in turn and `dvc status` must name exactly the stages whose READS hold that section.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tasks.params.sections import READS
from tasks.runtime.scratch_copy import copy_project


def leaves(data: dict, path: tuple = ()) -> Iterator[tuple]:
    """Key paths of every value in a params dict (a list or an empty mapping counts as one value)."""
    for key, value in data.items():
        if isinstance(value, dict) and value:
            yield from leaves(value, (*path, key))
        else:
            yield (*path, key)


def changed(value: object) -> object:
    """A different value of a similar kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "-x"
    if isinstance(value, list):
        return [*value, value[-1] if value else 1]
    return 1 if value is None else {"x": 1}


def readers(section: str, stages: list[str]) -> set[str]:
    """The DVC stages that read a section."""
    return {s for s in stages if section in READS[s.partition("@")[0]]}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A scratch repo whose dvc.lock matches its params, without running any stage."""
    from dvc.repo import Repo

    root = copy_project(tmp_path_factory.mktemp("repo"), profile="smoke")
    cwd = os.getcwd()
    os.chdir(root)  # DVC resolves stage paths against the working directory
    try:
        with Repo(str(root)) as dvc:
            for stage in dvc.index.stages:
                for item in [*stage.outs, *stage.deps]:
                    path = Path(item.fs_path)
                    if path.name != "params.yaml" and not path.exists():
                        path.parent.mkdir(parents=True, exist_ok=True)
                        if path.suffix:
                            path.write_text("{}")
                        else:
                            path.mkdir()
                            (path / "placeholder").write_text("x")
            dvc.commit(force=True)
        yield root
    finally:
        os.chdir(cwd)


def test_every_key_invalidates_exactly_the_stages_that_read_it(repo: Path) -> None:
    from dvc.repo import Repo

    text = (repo / "params.yaml").read_text()
    params = yaml.safe_load(text)
    with Repo(str(repo)) as dvc:
        stages = [s.addressing for s in dvc.index.stages]
        assert {s.partition("@")[0] for s in stages} == set(READS)
        assert dvc.status() == {}
        wrong = {}
        try:
            # layout reaches dvc.yaml as paths (${layout.*}); every other section must be tracked key by key.
            for path in (p for p in leaves(params) if p[0] != "layout"):
                edited = yaml.safe_load(text)
                holder = edited
                for key in path[:-1]:
                    holder = holder[key]
                holder[path[-1]] = changed(holder[path[-1]])
                (repo / "params.yaml").write_text(yaml.safe_dump(edited, sort_keys=False))
                marked = {
                    stage
                    for stage, changes in dvc.status().items()
                    for change in changes
                    if isinstance(change, dict) and "params.yaml" in change.get("changed deps", {})
                }
                if marked != readers(path[0], stages):
                    wrong[".".join(map(str, path))] = sorted(marked)
        finally:
            (repo / "params.yaml").write_text(text)
    assert not wrong, f"keys whose change marks the wrong stages: {wrong}"
    assert len(list(leaves(params))) > 80  # every section's keys were tried, not a handful
