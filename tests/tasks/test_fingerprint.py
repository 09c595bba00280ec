"""Fingerprints: the same inputs give the same one, any changed param or byte of input gives another."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tasks.plumbing.fingerprint import content_digest, digest, fingerprint


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    model, data = tmp_path / "model", tmp_path / "data.jsonl"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text('{"hidden": 8}')
    (model / "sub" / "weights.bin").write_bytes(b"\x00\x01\x02")
    data.write_text('{"messages": []}\n')
    return model, data


def test_same_params_and_content_give_the_same_fingerprint(inputs, tmp_path, stage_config, params_at):
    model, data = inputs
    config = stage_config("sft", params_at(tmp_path)).sft
    copy = shutil.copytree(model, tmp_path / "elsewhere")  # another path, the same bytes
    assert fingerprint(config, model, data) == fingerprint(config, copy, data)
    assert fingerprint(config, model, data) == fingerprint(
        stage_config("sft", params_at(tmp_path)).sft, model, data
    )


def test_a_changed_param_or_input_byte_or_file_name_changes_it(inputs, tmp_path, stage_config, params_at):
    model, data = inputs
    params = params_at(tmp_path)
    config = stage_config("sft", params).sft
    before = fingerprint(config, model, data)
    assert fingerprint(stage_config("sft", params, learning_rate=0.02).sft, model, data) != before
    assert fingerprint((config, "wide"), model, data) != fingerprint((config, "strong"), model, data)
    data.write_text('{"messages": [1]}\n')
    assert fingerprint(config, model, data) != before
    data.write_text('{"messages": []}\n')
    assert fingerprint(config, model, data) == before
    (model / "sub" / "weights.bin").rename(model / "sub" / "weights2.bin")
    assert fingerprint(config, model, data) != before


def test_a_missing_input_is_an_error_not_a_silent_match(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        content_digest(tmp_path / "nowhere")


def test_digest_is_the_synthesis_journals_old_hash():
    # Journals of killed syntheses named by the earlier inline hash must still be found.
    decisive = {"env": {"name": "tictactoe"}, "seed": 0, "temperature": 1.0}
    old = hashlib.sha256(json.dumps(decisive, sort_keys=True).encode()).hexdigest()[:16]
    assert digest(decisive) == old
