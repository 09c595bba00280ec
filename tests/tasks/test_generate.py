"""The generate stage: balanced, disjoint, validated splits; a corrupted dataset stops the pipeline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from datasets import Dataset

import tasks.generate
from tasks import generate, synthesize
from tasks.runtime.validation import DataValidationError
from wander.core.atomic_io import read_jsonl, write_jsonl

SPLITS = ("train", "eval", "test")


def test_splits_are_sized_balanced_disjoint_and_validated(shared_params: dict, generated: dict) -> None:
    out = Path(shared_params["layout"]["datasets"])
    splits = {s: read_jsonl(out / f"{s}.jsonl") for s in SPLITS}
    sizes = {s: shared_params["generate"][f"num_{s}"] for s in SPLITS}
    assert {s: len(rows) for s, rows in splits.items()} == sizes
    seeds = [r["seed"] for rows in splits.values() for r in rows]
    assert len(seeds) == len(set(seeds))
    groups = shared_params["env"]["tictactoe"]["num_groups"]
    for split, rows in splits.items():
        assert set(rows[0]) == {"seed", "random_move_prob", "stratum", "model_starts", "start_moves"}
        counts = [sum(r["stratum"] == g for r in rows) for g in range(groups)]
        assert max(counts) - min(counts) <= 1, split
        # Stratum g covers the g-th quarter of the skill range.
        assert all(
            r["stratum"] / groups <= r["random_move_prob"] <= (r["stratum"] + 1) / groups for r in rows
        )
    report = json.loads((out / "validation.json").read_text())
    assert set(report) == {*SPLITS, "all"} and all(r["success"] for r in report.values())
    metrics_dir = Path(shared_params["layout"]["metrics"])
    # The DVC metrics file is a flat headline; the per-split breakdown is the details file (a plain out).
    headline = json.loads((metrics_dir / "generate.json").read_text())
    assert headline == {"episodes": sum(sizes.values()), "seconds": headline["seconds"]}
    details = json.loads((Path(shared_params["layout"]["details"]) / "generate.json").read_text())
    assert details == generated and details["splits"]["train"]["episodes"] == sizes["train"]
    assert sum(details["splits"]["train"]["per_stratum"].values()) == sizes["train"]


def test_same_params_give_the_same_bytes(
    tmp_path: Path, params_at, stage_config, shared_params: dict, generated: dict
) -> None:
    params = params_at(tmp_path)
    generate.run(stage_config("generate", params))
    for split in SPLITS:
        mine = Path(params["layout"]["datasets"]) / f"{split}.jsonl"
        shared = Path(shared_params["layout"]["datasets"]) / f"{split}.jsonl"
        assert mine.read_bytes() == shared.read_bytes()


def test_failed_validation_keeps_the_previous_datasets(
    tmp_path: Path, params_at, stage_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = stage_config("generate", params_at(tmp_path))
    generate.run(config)
    before = {p.name: p.read_bytes() for p in Path(config.layout.datasets).iterdir()}
    real = tasks.generate.load_environment

    class Broken:  # an env whose specs carry an impossible opponent skill
        def __init__(self, **kwargs: object) -> None:
            self.env = real(**kwargs)
            self.spec_checks = self.env.spec_checks  # the real env's checks: the specs are what is broken

        def get_dataset(self, split: str) -> Dataset:
            rows = self.env.get_dataset(split).to_list()
            return Dataset.from_list([{**r, "random_move_prob": 1.5} for r in rows])

    monkeypatch.setattr(tasks.generate, "load_environment", Broken)
    with pytest.raises(
        DataValidationError, match=r"column 'random_move_prob' \(min_value=0.0, max_value=1.0\)"
    ):
        generate.run(stage_config("generate", params_at(tmp_path), num_train=60))
    assert {p.name: p.read_bytes() for p in Path(config.layout.datasets).iterdir()} == before
    assert not [p for p in Path(config.layout.datasets).parent.iterdir() if ".tmp-" in p.name]  # no debris


def test_corrupted_dataset_is_rejected_and_nothing_downstream_changes(
    tmp_path: Path, params_at, stage_config, shared_params: dict, generated: dict
) -> None:
    params = params_at(tmp_path)
    specs_dir = Path(params["layout"]["datasets"])
    shutil.copytree(shared_params["layout"]["datasets"], specs_dir)
    rows = read_jsonl(specs_dir / "train.jsonl")
    rows[5]["seed"] = rows[4]["seed"]  # a duplicated episode
    rows[7]["stratum"] = 9  # a stratum that does not exist
    write_jsonl(specs_dir / "train.jsonl", rows)
    downstream = Path(params["layout"]["episodes"]) / "episodes.jsonl"
    downstream.parent.mkdir(parents=True)
    downstream.write_text("previous episodes\n")

    with pytest.raises(DataValidationError) as e:
        synthesize.run(stage_config("synthesize", params))
    message = str(e.value)
    assert message.startswith("validation of 'specs train' failed")
    assert (
        "expect_column_values_to_be_unique on column 'seed'" in message
        and f"e.g. {rows[4]['seed']} (x2)" in message
    )
    assert (
        "expect_column_values_to_be_in_set on column 'stratum' (value_set=[0, 1, 2, 3])" in message
        and "e.g. 9" in message
    )
    assert "difficulty strata are balanced" in message
    assert downstream.read_text() == "previous episodes\n"
    assert not (Path(params["layout"]["work"]) / "synthesize").exists()  # not a single episode was played
