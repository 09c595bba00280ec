"""The pretrained chat model through the whole pipeline: `dvc repro` on the llm-smoke profile (SmolLM2-135M-Instruct,
a step or two of SFT and GRPO, one-move games), each stage's outputs loaded; and `make run PROFILE=llm`'s switch."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import mlflow
import pytest
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer

from flows.pipeline import apply_profile
from tasks.params.load import read_params
from tasks.runtime.scratch_copy import PROJECT, copy_project, run_in
from wander import load_environment
from wander.core.policy import Reply
from wander.policies import llama_decode
from wander.training.chat_tokens import render_ids

MODELS = ["sft", "grpo/wide"]  # the chat profile's one curriculum stage
STAGES = ["build_model", "generate", "synthesize", "curate", "sft", "grpo", "evaluate", "register"]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch copy where `dvc repro` ran the llm-smoke profile (about 4 minutes on 2 quiet cores)."""
    root = copy_project(tmp_path_factory.mktemp("llm"), profile="llm-smoke")
    run_in(root, ["dvc", "repro"])
    return root


@pytest.mark.slow
def test_every_stage_runs_on_the_chat_model_and_its_outputs_load(project: Path) -> None:
    root = project
    assert sorted(yaml.safe_load((root / "dvc.lock").read_text())["stages"]) == sorted(STAGES)
    origin = json.loads((root / "data/models/base/wander_model.json").read_text())
    assert origin["model"] == "smollm2-135m-instruct" and origin["source"] == "package"
    assert json.loads((root / "data/metrics/sft.json").read_text())["steps"] >= 1
    for name in MODELS:
        folder = root / "data/models" / name
        model = AutoModelForCausalLM.from_pretrained(folder)
        assert model.config.num_key_value_heads < model.config.num_attention_heads  # SmolLM2's GQA (9 / 3)
        assert sum(p.numel() for p in model.parameters()) > 100e6
        # Its greedy replies go through `generate`: the fast decoder reproduces only plain multi-head attention.
        assert not llama_decode.supports(model)
        # Each checkpoint keeps the base's chat template, marked for SFT's assistant-only loss.
        assert "{% generation %}" in AutoTokenizer.from_pretrained(folder).chat_template, name
    for name in MODELS[1:]:  # trained through LoRA (the profile's grpo.lora), saved merged: plain checkpoints
        assert not (root / "data/models" / name / "adapter_config.json").exists(), name
        assert json.loads((root / "data/metrics/grpo.json").read_text())[name.replace("/", "-")]["steps"] == 1
        curve = json.loads((root / "data/models" / name / "curve.json").read_text())
        assert len(curve) == 2, name  # the learning curve's exact points: the stage's start and its one step

    matrix = json.loads((root / "data/eval/matrix.json").read_text())
    rows = [name.replace("/", "-") for name in MODELS]  # grpo/wide is row grpo-wide
    assert list(matrix["policies"]) == ["base", *rows, "teacher", "minimax", "random"]
    assert set(matrix["exact"]) == {"base", *rows}  # every greedy model row has exact results
    base = matrix["exact"]["base"]["random"]  # zero-shot, SmolLM2 answers in prose: every game invalid
    assert base["format"] == 0.0 and base["any_invalid"] == 1.0
    assert matrix["exact"]["sft"]["random"]["format"] > 0.5  # a step or two of SFT: the env's reply format

    registered = json.loads((root / "data/metrics/register.json").read_text())
    assert registered["version"] == 1 and registered["promoted"]
    client = mlflow.MlflowClient(f"sqlite:///{root}/mlflow/mlflow.db")
    assert int(client.get_model_version_by_alias("wander-tictactoe", "champion").version) == 1
    assert "Data and pipelines are up to date." in run_in(root, ["dvc", "repro"])


@pytest.mark.slow
def test_sft_and_grpo_read_the_env_prompt_through_the_models_template(project: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(project / "data/models/base")
    row = json.loads((project / "data/sft/train.jsonl").read_text().splitlines()[0])
    # SFT's loss covers exactly the assistant's reply and its end-of-turn token (TRL's assistant_only_loss mask).
    out = tokenizer.apply_chat_template(
        row["messages"], tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    learned = [t for t, m in zip(out["input_ids"], out["assistant_masks"], strict=True) if m]
    assert tokenizer.decode(learned) == row["messages"][-1]["content"] + "<|im_end|>"
    # A GRPO decision prompt: the `lines` rendering writes no system prompt, so SmolLM2's template puts its default
    # one first; then the position's rows (free cells as digits), columns and diagonals, the model's mark, then the
    # assistant's turn.
    params = read_params(project / "params.yaml")
    env = load_environment(**{"name": "tictactoe", **params["env"]["tictactoe"]})
    episode = env.start(env.get_dataset("eval")[0])
    prompt = tokenizer.decode(render_ids(tokenizer, env.observation(episode), True))
    assert prompt.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    cell, mark = "[XO0-8]", "[XO]"
    shown = re.search(
        rf"<\|im_start\|>user\n({cell}{{3}})/({cell}{{3}})/({cell}{{3}})\n(.+)\n(.+)\n{mark}<\|im_end\|>",
        prompt,
    )
    assert shown, prompt
    rows = "".join(shown.groups()[:3])
    columns = "/".join(rows[c::3] for c in range(3))
    assert shown.group(4) == columns and shown.group(5) == f"{rows[0::4]}/{rows[2:7:2]}"
    assert prompt.endswith("<|im_start|>assistant\n")
    assert len(render_ids(tokenizer, env.observation(episode), True)) < 80
    env.advance(episode, Reply("<move>4</move>"))  # the chat model's reply is read as the env's move


def test_a_profile_switch_writes_its_values_into_params_yaml_keeping_the_comments(tmp_path: Path) -> None:
    for name in ("params.yaml", "params.llm.yaml"):
        shutil.copy(PROJECT / name, tmp_path / name)
    before = (tmp_path / "params.yaml").read_text()
    said = apply_profile(tmp_path, "llm")
    assert "params.yaml now holds profile 'llm'" in said and "git checkout params.yaml" in said
    after = (tmp_path / "params.yaml").read_text()
    assert read_params(tmp_path / "params.yaml") == read_params(PROJECT / "params.yaml", "llm")
    # As `dvc exp run -S` edits it: only the profile's values change; every comment and line stays in place.
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]
    assert len(changed) == int(re.search(r"(\d+) values from", said).group(1)) > 10
    assert all(a.split("#")[1:] == b.split("#")[1:] for a, b in changed)
    assert "  model: smollm2-135m-instruct" in after and "null" in after
    assert "nothing changed" in apply_profile(tmp_path, "llm")  # applying it again does nothing
