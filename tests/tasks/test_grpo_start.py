"""A GRPO curriculum stage starts from the point the stage before it measured, and with `until_unbeaten` a start no
line beats is the stage's result: its model as it is, no step trained (the stage function, smoke params)."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

from tasks.grpo import STAGE_FILE, start_point, train_stage
from wander.eval.curves import CURVE_FILE

from .conftest import config


def measured_stage(folder: Path, model: Path, points: list[dict], kept_step: int | None) -> Path:
    """`folder` as an earlier curriculum stage leaves it: a model, its curve and its record."""
    shutil.copytree(model, folder)
    (folder / CURVE_FILE).write_text(json.dumps(points))
    metrics = {"steps": points[-1]["step"]} | ({} if kept_step is None else {"kept_step": kept_step})
    (folder / STAGE_FILE).write_text(json.dumps({"fingerprint": "earlier", "metrics": metrics}))
    return folder


BEATEN = {"step": 0, "random/win": 0.8, "unbeaten": 0.0, "score": -1.2}
UNBEATEN = {"step": 2, "random/win": 0.9, "unbeaten": 1.0, "score": 0.9}


def test_the_start_point_is_the_kept_one_of_the_stage_that_saved_the_model(tmp_path, base_model):
    assert start_point(base_model) is None  # no stage measured the SFT (here: base) model
    kept_first = measured_stage(tmp_path / "a", base_model, [BEATEN, UNBEATEN], kept_step=0)
    assert start_point(kept_first) == BEATEN
    last = measured_stage(tmp_path / "b", base_model, [BEATEN, UNBEATEN], kept_step=None)
    assert start_point(last) == UNBEATEN


def test_a_stage_whose_start_no_line_beats_keeps_it_without_a_step(
    tmp_path, params_at, base_model, generated, shared_params
):
    params = params_at(tmp_path)
    shutil.copytree(shared_params["layout"]["datasets"], params["layout"]["datasets"])
    stages = {"wide": {"max_steps": 2}, "strong": {"max_steps": 2}}
    params["grpo"].update(stages=stages, curve_every=1, keep_best=True, until_unbeaten=True)
    checked = config("grpo", params)
    curriculum = checked.grpo.curriculum(checked.grpo.env.get(checked.env.name, {}))
    models = Path(params["layout"]["models"]) / "grpo"
    wide = measured_stage(models / "wide", base_model, [BEATEN, UNBEATEN], kept_step=2)
    out = models / "strong"

    def stage() -> dict:
        return train_stage(checked, curriculum, 1, wide, out, lambda name: contextlib.nullcontext())

    metrics = stage()
    assert metrics["steps"] == 0 and metrics["kept_step"] == 0
    assert (out / "model.safetensors").read_bytes() == (wide / "model.safetensors").read_bytes()
    assert json.loads((out / CURVE_FILE).read_text()) == [{**UNBEATEN, "step": 0, "seconds": 0.0}]
    record = json.loads((out / STAGE_FILE).read_text())
    assert record["metrics"] == metrics and record["fingerprint"] != "earlier"
    assert not (Path(params["layout"]["work"]) / "grpo").exists()  # no trainer ever wrote its work folder
    assert stage() == metrics  # the same inputs: kept as saved
