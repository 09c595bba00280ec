"""The build_model stage: the scratch model from the env's corpus, or any model folder copied with its origin."""

from __future__ import annotations

import json
from pathlib import Path

from tasks import build_model
from wander.policies.scratch_model import load_tokenizer


def test_scratch_model_reads_every_env_string(shared_params: dict, base_model: Path) -> None:
    origin = json.loads((base_model / build_model.ORIGIN_FILE).read_text())
    assert origin["model"] == "scratch" and origin["env"]["name"] == "tictactoe"
    assert origin["scratch"]["hidden_size"] == shared_params["build_model"]["scratch"]["hidden_size"]
    metrics = json.loads((Path(shared_params["layout"]["metrics"]) / "build_model.json").read_text())
    assert metrics["context_length"] == build_model.context_length(base_model) == 4096
    tokenizer = load_tokenizer(base_model)
    text = "You X, first.\n.../.X./..O\nmoves 0123567"
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text
    # The env's reply tags are whole tokens of the saved tokenizer: a reply is the tag, the cell, the tag.
    assert tokenizer.tokenize("<move>4</move>") == ["<move>", "4", "</move>"]


def test_a_model_folder_is_copied_with_its_origin(
    tmp_path: Path, params_at, stage_config, base_model: Path
) -> None:
    params = params_at(tmp_path)
    metrics = build_model.run(stage_config("build_model", params, model=str(base_model)))
    out = Path(params["layout"]["base_model"])
    origin = json.loads((out / build_model.ORIGIN_FILE).read_text())
    assert origin == {"model": str(base_model), "source": "path", "revision": None}
    assert (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()
    assert metrics["vocab_size"] == len(load_tokenizer(base_model))
