"""The pipeline is environment-generic: no stage or flow names a concrete environment's module."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_no_stage_or_flow_imports_a_concrete_environment():
    # The same pattern as `grep -r "envs.tictactoe" tasks flows`: the dot matches any character.
    names = sorted(p.name for p in (REPO / "envs").iterdir() if (p / "__init__.py").is_file())
    assert {"tictactoe", "reverse_text", "coding", "reasoning_gym"} <= set(names)  # every env folder, found
    pattern = re.compile(rf"envs.({'|'.join(names)})")
    hits = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for folder in ("tasks", "flows")
        for path in sorted((REPO / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []
