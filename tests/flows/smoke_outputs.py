"""What every rubric env's smoke run must hold, read from its outputs: shared by the test_pipeline_<env>.py files.

Each check reads one finished scratch project (tests/flows/conftest.py's `smoke_pipeline`); an env's own file adds
what its outputs mean (its teacher, its curation floor, its reply syntax)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
import yaml

from tasks.params.load import load_params
from wander import load_environment


def read_json(project: Path, path: str) -> dict:
    """One JSON output of the run."""
    return json.loads((project / path).read_text())


def read_jsonl(project: Path, path: str) -> list[dict]:
    """One JSON-lines output of the run."""
    return [json.loads(line) for line in (project / path).read_text().splitlines()]


def run_params(project: Path) -> dict:
    """The params.yaml the run read."""
    return yaml.safe_load((project / "params.yaml").read_text())


def lineage(project: Path) -> dict[str, str]:
    """The run's models in training order, name -> folder, as the params model derives them from the env's
    curriculum (base, sft, each GRPO stage)."""
    return load_params(project / "params.yaml").register.lineage


def check_training_stages(project: Path) -> None:
    """SFT ran one step per batch of its examples per epoch, each GRPO stage its max_steps; finite losses; the
    rubric's reward (0 to 1 for every rubric env here) bounds GRPO's final reward."""
    params = run_params(project)
    curate, sft = read_json(project, "data/details/curate.json"), read_json(project, "data/metrics/sft.json")
    batch = params["sft"]["per_device_train_batch_size"] * params["sft"]["gradient_accumulation_steps"]
    assert sft["games"] == curate["train"]
    assert sft["steps"] == math.ceil(sft["examples"] / batch) * params["sft"]["num_train_epochs"]
    assert math.isfinite(sft["train_loss"]) and sft["train_loss"] > 0
    stages = read_json(project, "data/metrics/grpo.json")
    assert list(stages) == list(lineage(project))[2:]  # one headline per stage of the env's curriculum
    for name, grpo in stages.items():
        assert grpo["steps"] == params["grpo"]["max_steps"] and math.isfinite(grpo["train_loss"]), name
        assert 0.0 <= grpo["final_reward"] <= 1.0, name


def env_shape(project: Path, env: str) -> tuple[int, tuple[str, ...]]:
    """The env's strata and its suite's sides, as the run's params.yaml sets it up (its block, or none)."""
    loaded = load_environment(env, **(run_params(project)["env"].get(env) or {}))
    return loaded.spec_checks().strata, loaded.evaluation_suite().sides


def matrix_rows(project: Path, env: str, metrics: set[str]) -> list[dict]:
    """The evaluation matrix's rows, checked: the reward columns then `metrics`, the lineage, the teacher and the
    expert in order, each on every stratum of the suite's sides (eval and test, or the env's), the asked games, no error, sound intervals."""
    params = run_params(project)
    strata, sides = env_shape(project, env)
    with (project / "data/eval/matrix.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:10] == [
        "policy", "opponent", "side", "decoding", "games", "errored", "reward", "reward_ci_low", "reward_ci_high",
        "reward_sd",
    ] and metrics <= set(rows[0])  # fmt: skip
    models = list(lineage(project))
    assert list(dict.fromkeys(r["policy"] for r in rows)) == [*models, "teacher", "expert"]
    for policy in (*models, "teacher", "expert"):
        cells = [r for r in rows if r["policy"] == policy]
        assert {(r["opponent"], r["side"]) for r in cells} == {
            (f"stratum-{k}", s) for k in range(strata) for s in sides
        } and len(cells) == len(sides) * strata
        for r in cells:
            assert int(r["games"]) == params["evaluate"]["games"] and int(r["errored"]) == 0, (policy, r)
            low, mean, high = (float(r[k]) for k in ("reward_ci_low", "reward", "reward_ci_high"))
            assert 0.0 <= low <= mean <= high and mean <= 1.0, (policy, r)
    return rows


def check_headline_and_register(project: Path, rows: list[dict]) -> None:
    """metrics.json holds the reward of the candidate and the teacher per split, the mean of their cells; register
    made version 1 from it, the teacher gate off (the smoke profile) and the start-model gate passed."""
    headline = read_json(project, "data/eval/metrics.json")
    *_, start, candidate = lineage(project)
    assert set(headline) == {candidate, "teacher"}
    sides = set(dict.fromkeys(r["side"] for r in rows))
    for policy, values in headline.items():
        assert set(values) == {"reward"} and set(values["reward"]) == {"all", *sides}
        cells = [float(r["reward"]) for r in rows if r["policy"] == policy]
        assert values["reward"]["all"] == pytest.approx(sum(cells) / len(cells), abs=1e-4)  # equal cells
    register = read_json(project, "data/metrics/register.json")
    assert register["version"] == 1 and register["promoted"] is True
    assert register["candidate_reward"] == pytest.approx(headline[candidate]["reward"]["all"], abs=1e-4)
    assert register["reason"] == f"first registered version, no worse than {start}"


def teacher_sample(project: Path) -> str:
    """The report's best teacher episode, as rendered text; it scored a full reward."""
    report = (project / "data/eval/report.md").read_text()
    samples = report[report.index("## Sample episodes") :]
    teacher = samples[samples.index("### teacher: the best episode") :]
    teacher = teacher[: teacher.index("```\n", teacher.index("```text") + 1)]
    assert "reward 1.000" in teacher.splitlines()[0]
    return teacher
