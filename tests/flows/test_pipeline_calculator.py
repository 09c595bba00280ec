"""calculator through the whole smoke pipeline (DVC alone): what its outputs mean, stage by stage.

The run is tests/flows/conftest.py's `smoke_pipeline("calculator")`; what holds for every env (every stage ran, a
second repro does nothing) is in test_pipeline_envs.py."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from envs.calculator import TOOLS, solution
from wander.core.tool_env import TOOL_CALL

from .smoke_outputs import (
    check_headline_and_register,
    check_training_stages,
    matrix_rows,
    read_json,
    read_jsonl,
    teacher_sample,
)


@pytest.fixture(scope="module")
def project(smoke_pipeline: Callable[[str], Path]) -> Path:
    """The session's smoke pipeline run of calculator (tests/flows/conftest.py), shared with test_pipeline_envs."""
    return smoke_pipeline("calculator")


def calls(episode: dict) -> list[tuple[str, dict, str]]:
    """The episode's tool calls in order: (tool, arguments, the tool message that answered it)."""
    messages = episode["messages"]
    out = []
    for i, m in enumerate(messages):
        for raw in TOOL_CALL.findall(m["content"] if m["role"] == "assistant" else ""):
            call = json.loads(raw)
            assert messages[i + 1]["role"] == "tool", episode["seed"]
            out.append((call["name"], call["arguments"], messages[i + 1]["content"]))
    return out


@pytest.mark.slow
def test_the_teacher_calls_a_tool_per_operation_and_misreads_a_fifth(project: Path) -> None:
    episodes = read_jsonl(project, "data/synth/episodes.jsonl")
    params = yaml.safe_load((project / "params.yaml").read_text())
    assert len(episodes) == params["generate"]["num_train"] and not any(e["error"] for e in episodes)
    for e in episodes:
        start, steps = solution(e["spec"]["problem"])
        made = calls(e)
        # One call per operation (stratum k: k+1), each on the previous result, answered by the real tool.
        assert len(made) == len(steps) == e["spec"]["stratum"] + 1 == e["values"]["tool_calls"], e["seed"]
        value = start
        for (name, arguments, result), (step, _) in zip(made, steps, strict=True):
            assert name == step and arguments["a"] == value and result == json.dumps(TOOLS[name](**arguments))
            value = json.loads(result)
        assert e["messages"][-1] == {"role": "assistant", "content": f"<answer>{value}</answer>"}
        assert e["values"]["tool_errors"] == 0 and e["values"]["format"] == 1.0
        assert e["values"]["correct"] == float(value == e["spec"]["answer"])
        misread = [b["b"] - s for (_, b, _), (_, s) in zip(made, steps, strict=True) if b["b"] != s]
        assert misread == ([] if e["values"]["correct"] else [1]), e["seed"]  # a slip: one operand off by one
    # teacher_skill 0.2: ~80% exact (measured on the smoke's 48: 0.896); a slip-free or a broken teacher fails.
    correct = sum(e["values"]["correct"] for e in episodes) / len(episodes)
    assert 0.65 < correct < 1.0
    synth = read_json(project, "data/metrics/synthesize.json")
    assert synth["teacher_reward"] == pytest.approx(correct, abs=1e-4) and synth["teacher_invalid"] == 0.0


@pytest.mark.slow
def test_curation_keeps_exact_answers_and_its_counts_add_up(project: Path) -> None:
    episodes = read_jsonl(project, "data/synth/episodes.jsonl")
    curate = read_json(project, "data/details/curate.json")
    dropped = curate["dropped"]
    assert curate["input"] == len(episodes) == curate["kept"] + sum(dropped.values())
    assert dropped["correct"] == sum(e["values"]["correct"] < 1 for e in episodes) > 0
    assert dropped["correct"] == sum(dropped.values())  # every tool call of the teacher is well-formed
    synth = read_json(project, "data/metrics/synthesize.json")
    assert "outcome" not in dropped and curate["correct"] == {"input": synth["teacher_reward"], "kept": 1.0}
    assert curate["train"] + curate["eval"] == curate["kept"] == sum(curate["per_stratum"].values())
    train = read_jsonl(project, "data/sft/train.jsonl")
    assert len(train) == curate["train"] + curate["copies"]
    assert len(read_jsonl(project, "data/sft/eval.jsonl")) == curate["eval"]
    assert all(any(m["role"] == "tool" for m in r["messages"]) for r in train)  # SFT learns the tool protocol


@pytest.mark.slow
def test_every_training_stage_ran_its_steps_with_finite_losses(project: Path) -> None:
    check_training_stages(project)


@pytest.mark.slow
def test_the_matrix_holds_every_row_on_the_env_strata_and_register_reads_it(project: Path) -> None:
    rows = matrix_rows(project, "calculator", {"correct", "format", "tool_calls", "tool_errors"})
    for r in (r for r in rows if r["policy"] in ("teacher", "expert")):  # a call per operation, none failing
        assert float(r["tool_calls"]) == int(r["opponent"].removeprefix("stratum-")) + 1, r
        assert float(r["tool_errors"]) == 0.0 and float(r["format"]) == 1.0, r
    assert all(float(r["correct"]) == 1.0 for r in rows if r["policy"] == "expert")  # the slip-free reference
    teacher = json.loads((project / "data/eval/matrix.json").read_text())["policies"]["teacher"]["overall"]
    assert 0.5 < teacher["reward"] <= 1.0

    check_headline_and_register(project, rows)


@pytest.mark.slow
def test_the_report_shows_episodes_in_the_env_tool_syntax(project: Path) -> None:
    teacher = teacher_sample(project)
    call = r'\[assistant\] <tool_call>\{"name": "(add|subtract|multiply|divide)", "arguments": \{"a": \d+, "b": \d+\}\}</tool_call>'
    assert re.search(call + r"\n\[tool\] \d+\n", teacher) and re.search(
        r"\[assistant\] <answer>\d+</answer>", teacher
    )
