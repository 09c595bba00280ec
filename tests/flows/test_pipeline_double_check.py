"""double_check through the whole smoke pipeline (DVC alone): what its outputs mean, stage by stage.

The run is tests/flows/conftest.py's `smoke_pipeline("double_check")`; what holds for every env (every stage ran,
a second repro does nothing) is in test_pipeline_envs.py."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

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
    """The session's smoke pipeline run of double_check (tests/flows/conftest.py), shared with test_pipeline_envs."""
    return smoke_pipeline("double_check")


@pytest.mark.slow
def test_the_teacher_slips_then_catches_half_its_slips(project: Path) -> None:
    episodes = read_jsonl(project, "data/synth/episodes.jsonl")
    params = yaml.safe_load((project / "params.yaml").read_text())
    assert len(episodes) == params["generate"]["num_train"] and not any(e["error"] for e in episodes)
    for e in episodes:  # two answers each, the second scored against the question's value
        assert len(e["state"]["answers"]) == 2 and "Are you sure?" in e["messages"][3]["content"]
        assert e["values"]["correct"] == float(e["state"]["answers"][1] == e["spec"]["answer"])
    correct = sum(e["values"]["correct"] for e in episodes) / len(episodes)
    first = sum(e["values"]["first_correct"] for e in episodes) / len(episodes)
    # teacher_skill 0.3: ~70% right first, ~85% right after the doubt (measured on the smoke's 48: 0.81, 0.92).
    # A slip-free teacher (1.0), one that never fixes a slip (correct == first) or a broken one fails.
    assert 0.55 < first < correct < 1.0
    assert any(e["values"]["flipped"] and e["values"]["correct"] for e in episodes)  # a slip caught
    synth = read_json(project, "data/metrics/synthesize.json")
    assert synth["teacher_reward"] == pytest.approx(correct, abs=1e-4) and synth["teacher_invalid"] == 0.0


@pytest.mark.slow
def test_curation_keeps_only_answers_right_both_times_and_its_counts_add_up(project: Path) -> None:
    episodes = read_jsonl(project, "data/synth/episodes.jsonl")
    curate = read_json(project, "data/details/curate.json")
    dropped = curate["dropped"]
    assert curate["input"] == len(episodes) == curate["kept"] + sum(dropped.values())
    # The env's floors, in order: a wrong final answer, then a right one after a wrong first (a caught slip).
    assert dropped["correct"] == sum(e["values"]["correct"] < 1 for e in episodes) > 0
    assert dropped["first_correct"] == sum(
        e["values"]["correct"] == 1 and e["values"]["first_correct"] < 1 for e in episodes
    )
    assert "outcome" not in dropped and curate["correct"]["kept"] == curate["first_correct"]["kept"] == 1.0
    assert curate["train"] + curate["eval"] == curate["kept"] == sum(curate["per_stratum"].values())
    train = read_jsonl(project, "data/sft/train.jsonl")
    assert (
        len(train) == curate["train"] + curate["copies"]
        and len(read_jsonl(project, "data/sft/eval.jsonl")) == curate["eval"]
    )
    kept = {e["seed"]: e for e in episodes}
    assert all(kept[r["seed"]]["values"]["first_correct"] == 1.0 for r in train)


@pytest.mark.slow
def test_every_training_stage_ran_its_steps_with_finite_losses(project: Path) -> None:
    check_training_stages(project)


@pytest.mark.slow
def test_the_matrix_holds_every_row_on_the_env_strata_and_register_reads_it(project: Path) -> None:
    rows = matrix_rows(project, "double_check", {"correct", "first_correct", "flipped", "format"})
    assert all(float(r["correct"]) == 1.0 for r in rows if r["policy"] == "expert")  # the slip-free reference
    teacher = json.loads((project / "data/eval/matrix.json").read_text())["policies"]["teacher"]["overall"]
    # On the eval suite too: the teacher slips and catches some of its slips.
    assert 0.5 < teacher["reward"] <= 1.0 and teacher["first_correct"] < teacher["correct"]

    check_headline_and_register(project, rows)


@pytest.mark.slow
def test_the_report_shows_episodes_in_the_env_reply_syntax(project: Path) -> None:
    teacher = teacher_sample(project)
    assert re.search(
        r"\[assistant\] <answer>(-?\d+)</answer>\n\[user\] You answered \1\. Are you sure\?", teacher
    )
