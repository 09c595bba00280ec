"""workplace_assistant through the whole smoke pipeline (DVC alone): what its outputs mean, stage by stage.

The run is tests/flows/conftest.py's `smoke_pipeline("workplace_assistant")`; what holds for every env (every stage
ran, a second repro does nothing) is in test_pipeline_envs.py."""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from envs.workplace_assistant.workspace import TOOLS
from wander.core.tool_env import TOOL_CALL

STATE_METRICS = ("task_reward", "state_checks", "side_effects", "completed")


@pytest.fixture(scope="module")
def project(smoke_pipeline: Callable[[str], Path]) -> Path:
    """The session's smoke pipeline run of workplace_assistant (tests/flows/conftest.py), shared with
    test_pipeline_envs."""
    return smoke_pipeline("workplace_assistant")


def read_json(project: Path, path: str) -> dict:
    """One JSON output of the run."""
    return json.loads((project / path).read_text())


def read_jsonl(project: Path, path: str) -> list[dict]:
    """One JSON-lines output of the run."""
    return [json.loads(line) for line in (project / path).read_text().splitlines()]


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
    params = yaml.safe_load((project / "params.yaml").read_text())
    curate, sft = read_json(project, "data/details/curate.json"), read_json(project, "data/metrics/sft.json")
    batch = params["sft"]["per_device_train_batch_size"] * params["sft"]["gradient_accumulation_steps"]
    assert sft["games"] == curate["train"]
    assert sft["steps"] == math.ceil(sft["examples"] / batch) * params["sft"]["num_train_epochs"]
    assert math.isfinite(sft["train_loss"]) and sft["train_loss"] > 0
    for name, stage in params["grpo"]["stages"].items():
        grpo = read_json(project, f"data/metrics/grpo-{name}.json")
        assert grpo["steps"] == stage["max_steps"] and math.isfinite(grpo["train_loss"]), name
        assert 0.0 <= grpo["final_reward"] <= 1.0, name  # task_reward is floored at 0 and at most 1


@pytest.mark.slow
def test_the_matrix_holds_every_row_on_the_env_strata_and_register_reads_it(project: Path) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    strata = params["env"]["workplace_assistant"]["num_groups"]
    with (project / "data/eval/matrix.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:10] == [
        "policy", "opponent", "side", "decoding", "games", "errored", "reward", "reward_ci_low", "reward_ci_high",
        "reward_sd",
    ] and {*STATE_METRICS, "format", "tool_calls", "tool_errors"} <= set(rows[0])  # fmt: skip
    lineage = ["base", "sft", "grpo-wide", "grpo-strong", "grpo-polish"]
    assert list(dict.fromkeys(r["policy"] for r in rows)) == [*lineage, "teacher", "expert"]
    for policy in (*lineage, "teacher", "expert"):
        cells = [r for r in rows if r["policy"] == policy]
        assert {(r["opponent"], r["side"]) for r in cells} == {
            (f"stratum-{k}", s) for k in range(strata) for s in ("eval", "test")
        } and len(cells) == 2 * strata
        for r in cells:
            assert int(r["games"]) == params["evaluate"]["games"] and int(r["errored"]) == 0, (policy, r)
            low, value, high = (float(r[k]) for k in ("reward_ci_low", "reward", "reward_ci_high"))
            assert 0.0 <= low <= value <= high and value <= 1.0, (policy, r)
            assert float(r["side_effects"]) >= 0.0, (policy, r)  # the side-effect metric is in every cell
    for r in (r for r in rows if r["policy"] == "expert"):  # the slip-free reference: every request, cleanly
        assert float(r["completed"]) == 1.0 and float(r["side_effects"]) == 0.0, r
        assert float(r["tool_calls"]) == int(r["opponent"].removeprefix("stratum-")) + 1, r
    teacher = json.loads((project / "data/eval/matrix.json").read_text())["policies"]["teacher"]["overall"]
    assert 0.5 < teacher["reward"] <= 1.0 and "side_effects" in teacher

    headline = read_json(project, "data/eval/metrics.json")
    assert set(headline) == {"grpo-polish", "teacher"}
    for policy, values in headline.items():
        assert set(values) == {"reward"} and set(values["reward"]) == {"all", "eval", "test"}
        cells = [float(r["reward"]) for r in rows if r["policy"] == policy]
        assert values["reward"]["all"] == pytest.approx(sum(cells) / len(cells), abs=1e-4)  # equal cells

    register = read_json(project, "data/metrics/register.json")
    assert register["version"] == 1 and register["promoted"] is True
    assert register["candidate_reward"] == pytest.approx(headline["grpo-polish"]["reward"]["all"], abs=1e-4)
    # The smoke profile turns the teacher gate off (register.baseline: null); the start-model gate still ran.
    assert register["reason"] == "first registered version, no worse than grpo-strong"


@pytest.mark.slow
def test_the_report_shows_episodes_in_the_env_tool_syntax(project: Path) -> None:
    report = (project / "data/eval/report.md").read_text()
    samples = report[report.index("## Sample episodes") :]
    teacher = samples[samples.index("### teacher: the best episode") :]
    teacher = teacher[: teacher.index("```\n", teacher.index("```text") + 1)]
    assert "reward 1.000" in teacher.splitlines()[0]
    call = r'\[assistant\] <tool_call>\{"name": "(\w+)", "arguments": \{.*\}\}</tool_call>\n\[tool\] '
    assert {m for m in re.findall(call, teacher)} & set(TOOLS)
