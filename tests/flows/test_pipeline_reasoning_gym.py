"""reasoning_gym (its default task) through the whole smoke pipeline (DVC alone): reasoning-gym's generator made the
splits, its scorer judged the teacher's answers, curation removed the slips, the suite has every level.

The run is tests/flows/conftest.py's `smoke_pipeline("reasoning_gym")`; what holds for every env is in
test_pipeline_envs.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.mark.slow
def test_reasoning_gym_runs_the_whole_pipeline_on_its_tasks_own_generator_and_scorer(
    smoke_pipeline: Callable[[str], Path],
) -> None:
    project = smoke_pipeline("reasoning_gym")
    episodes = [json.loads(line) for line in (project / "data/synth/episodes.jsonl").read_text().splitlines()]
    assert episodes and all(e["spec"]["task"] == "spell_backward" for e in episodes)
    scores = {e["values"]["correct"] for e in episodes}
    assert 1.0 in scores and min(scores) < 1.0  # right answers and slips (partial credit), as its scorer says
    synth = json.loads((project / "data/metrics/synthesize.json").read_text())
    assert 0.6 < synth["teacher_reward"] < 1.0  # competent but imperfect
    curate = json.loads((project / "data/details/curate.json").read_text())
    assert curate["dropped"]["correct"] > 0 and curate["kept"] == sum(
        e["values"]["correct"] == 1.0 for e in episodes
    )
    rows = (project / "data/eval/matrix.csv").read_text().splitlines()
    cells = {tuple(r.split(",")[1:3]) for r in rows[1:]}
    assert cells == {(f"stratum-{k}", s) for k in range(4) for s in ("eval", "test")}
    report = (project / "data/eval/report.md").read_text()
    assert "Spell this word backward" in report and "<answer>" in report
