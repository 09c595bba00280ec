"""The build_model stage: the scratch model from the env's corpus, the packaged chat model, or any model folder
copied with its origin."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from tasks import build_model
from wander.policies import packaged_models
from wander.policies.scratch_model import context_length, load_tokenizer


def test_scratch_model_reads_every_env_string(shared_params: dict, base_model: Path) -> None:
    origin = json.loads((base_model / build_model.ORIGIN_FILE).read_text())
    assert origin["model"] == "scratch" and origin["env"]["name"] == "tictactoe"
    assert origin["scratch"]["hidden_size"] == shared_params["build_model"]["scratch"]["hidden_size"]
    metrics = json.loads((Path(shared_params["layout"]["metrics"]) / "build_model.json").read_text())
    assert metrics["context_length"] == context_length(base_model) == 4096
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


def test_a_missing_packaged_model_names_the_install_command(monkeypatch) -> None:
    entry = packaged_models.PACKAGED["smollm2-135m-instruct"]
    monkeypatch.setitem(
        packaged_models.PACKAGED,
        "smollm2-135m-instruct",
        dataclasses.replace(entry, package="no_such_package_here"),
    )
    with pytest.raises(FileNotFoundError, match="make install"):
        packaged_models.packaged_file("smollm2-135m-instruct")


@pytest.mark.slow
def test_the_packaged_chat_model_builds_a_plain_checkpoint_that_answers(
    tmp_path: Path, params_at, stage_config
) -> None:
    params = params_at(tmp_path)
    metrics = build_model.run(stage_config("build_model", params, model="smollm2-135m-instruct"))
    out = Path(params["layout"]["base_model"])
    origin = json.loads((out / build_model.ORIGIN_FILE).read_text())
    wheel = packaged_models.packaged_file("smollm2-135m-instruct")
    assert origin["source"] == "package" and origin["license"] == "Apache-2.0"
    assert origin["version"] == "0.1.2" and origin["sha256"] == packaged_models.file_sha256(wheel)
    assert metrics["parameters"] == 134_515_008 and metrics["context_length"] == 8192
    # A plain folder: no GGUF marks in its config, loads with the ordinary classes, keeps the chat template.
    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config and config["use_cache"] is True
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    assert "<|im_start|>" in tokenizer.chat_template
    question = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    ids = tokenizer.apply_chat_template(
        question, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    answer = model.generate(**ids, max_new_tokens=12, do_sample=False)[0, ids["input_ids"].shape[1] :]
    assert "Paris" in tokenizer.decode(answer)
