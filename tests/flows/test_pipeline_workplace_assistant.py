"""workplace_assistant through the whole smoke pipeline (DVC alone): what its outputs mean, stage by stage.

The run is tests/flows/conftest.py's `smoke_pipeline("workplace_assistant")`; what holds for every env (every stage
ran, a second repro does nothing) is in test_pipeline_envs.py."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from envs.workplace_assistant.workspace import TOOLS
from wander.core.tool_env import TOOL_CALL

from .smoke_outputs import (
    check_headline_and_register,
    check_training_stages,
    matrix_rows,
    read_json,
    read_jsonl,
    teacher_sample,
)

STATE_METRICS = ("task_reward", "state_checks", "side_effects", "completed")


@pytest.fixture(scope="module")
def project(smoke_pipeline: Callable[[str], Path]) -> Path:
    """The session's smoke pipeline run of workplace_assistant (tests/flows/conftest.py), shared with
    test_pipeline_envs."""
    return smoke_pipeline("workplace_assistant")


def mean(episodes: list[dict], metric: str) -> float:
    """A rubric value's mean over episodes."""
    return sum(e["values"][metric] for e in episodes) / len(episodes)


@pytest.mark.slow
def test_the_teacher_acts_through_the_tools_and_slips_on_some_requests(project: Path) -> None:
    episodes = read_jsonl(project, "data/synth/episodes.jsonl")
    params = yaml.safe_load((project / "params.yaml").read_text())
    assert len(episodes) == params["generate"]["num_train"] and not any(e["error"] for e in episodes)
    for e in episodes:
        messages, v = e["messages"], e["values"]
        made = [
            (i, json.loads(raw))
            for i, m in enumerate(messages)
            if m["role"] == "assistant"
            for raw in TOOL_CALL.findall(m["content"])
        ]
        assert len(made) == v["tool_calls"] and v["tool_errors"] == 0 and v["format"] == 1.0, e["seed"]
        assert all(c["name"] in TOOLS and messages[i + 1]["role"] == "tool" for i, c in made), e["seed"]
        assert messages[-1]["role"] == "assistant" and not TOOL_CALL.search(messages[-1]["content"])
        # The rubric's arithmetic, as the README states it: checks minus half a point per side effect, floored.
        assert v["task_reward"] == pytest.approx(max(0.0, v["state_checks"] - 0.5 * v["side_effects"]))
        assert v["completed"] == float(v["state_checks"] == 1.0 and v["side_effects"] == 0), e["seed"]
        if v["completed"]:  # a clean request: one call per needed step (stratum k: k+1)
            assert v["tool_calls"] == e["spec"]["stratum"] + 1, e["seed"]
    # teacher_skill 0.2 (README: ~0.785 completed); measured on the smoke's 48: completed 0.708, reward 0.867,
    # side effects 0.104. A slip-free teacher (1.0, no side effects) or a broken one fails.
    assert 0.55 < mean(episodes, "completed") < mean(episodes, "task_reward") < 1.0
    assert 0.0 < mean(episodes, "side_effects") < 0.3  # a duplicated action is a side effect the metric sees
    synth = read_json(project, "data/metrics/synthesize.json")
    assert synth["teacher_reward"] == pytest.approx(mean(episodes, "task_reward"), abs=1e-4)
    assert synth["teacher_invalid"] == 0.0


@pytest.mark.slow
def test_curation_keeps_completed_requests_and_its_counts_add_up(project: Path) -> None:
    episodes = read_jsonl(project, "data/synth/episodes.jsonl")
    curate = read_json(project, "data/details/curate.json")
    dropped = curate["dropped"]
    assert curate["input"] == len(episodes) == curate["kept"] + sum(dropped.values())
    assert (
        dropped["completed"] == sum(e["values"]["completed"] < 1 for e in episodes) == sum(dropped.values())
    )
    assert "outcome" not in dropped and curate["completed"]["kept"] == 1.0
    assert curate["completed"]["input"] == pytest.approx(mean(episodes, "completed"), abs=1e-4)
    assert curate["train"] + curate["eval"] == curate["kept"] == sum(curate["per_stratum"].values())
    train = read_jsonl(project, "data/sft/train.jsonl")
    assert len(train) == curate["train"] + curate["copies"]
    assert len(read_jsonl(project, "data/sft/eval.jsonl")) == curate["eval"]
    clean = {e["seed"] for e in episodes if e["values"]["side_effects"] == 0 and e["values"]["completed"]}
    assert {r["seed"] for r in train} <= clean  # SFT never sees a side effect or a skipped step


@pytest.mark.slow
def test_every_training_stage_ran_its_steps_with_finite_losses(project: Path) -> None:
    check_training_stages(project)


@pytest.mark.slow
def test_the_matrix_holds_every_row_on_the_env_strata_and_register_reads_it(project: Path) -> None:
    rows = matrix_rows(
        project, "workplace_assistant", {*STATE_METRICS, "format", "tool_calls", "tool_errors"}
    )
    assert all(float(r["side_effects"]) >= 0.0 for r in rows)  # the side-effect metric is in every cell
    for r in (r for r in rows if r["policy"] == "expert"):  # the slip-free reference: every request, cleanly
        assert float(r["completed"]) == 1.0 and float(r["side_effects"]) == 0.0, r
        assert float(r["tool_calls"]) == int(r["opponent"].removeprefix("stratum-")) + 1, r
    teacher = json.loads((project / "data/eval/matrix.json").read_text())["policies"]["teacher"]["overall"]
    assert 0.5 < teacher["reward"] <= 1.0 and "side_effects" in teacher

    check_headline_and_register(project, rows)


@pytest.mark.slow
def test_the_report_shows_episodes_in_the_env_tool_syntax(project: Path) -> None:
    teacher = teacher_sample(project)
    call = r'\[assistant\] <tool_call>\{"name": "(\w+)", "arguments": \{.*\}\}</tool_call>\n\[tool\] '
    assert {m for m in re.findall(call, teacher)} & set(TOOLS)
