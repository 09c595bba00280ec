"""Fingerprints: the same inputs give the same one, any changed param or byte of input gives another."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tasks.runtime.fingerprint import code_digest, code_files, content_digest, digest, fingerprint


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


def project(root: Path) -> Path:
    """A small project: a stage importing library code at the top, lazily in a function, and relatively."""
    files = {
        "tasks/__init__.py": "",
        "tasks/stage.py": "from tasks import helper\n\ndef run():\n    from wander.lib import train\n    return train()\n",
        "tasks/helper.py": "from . import shared\n",
        "tasks/shared.py": "X = 1\n",
        "wander/__init__.py": "",
        "wander/lib.py": "import json\nimport wander.deep\n\ndef train():\n    return wander.deep.step()\n",
        "wander/deep.py": "def step():\n    return 1\n",
        "wander/other.py": "import wander.lib\n",  # imports the stage's code, but the stage does not import it
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_code_digest_covers_the_code_the_stage_runs_and_nothing_else(tmp_path: Path) -> None:
    root = project(tmp_path)
    names = [p.relative_to(root).as_posix() for p in code_files(["tasks.stage"], root)]
    assert names == [
        "tasks/__init__.py",
        "tasks/helper.py",
        "tasks/shared.py",
        "tasks/stage.py",
        "wander/__init__.py",
        "wander/deep.py",
        "wander/lib.py",
    ]
    before = code_digest(["tasks.stage"], root)
    (root / "wander/other.py").write_text("# changed\n")
    assert code_digest(["tasks.stage"], root) == before
    (root / "wander/deep.py").write_text("def step():\n    return 2\n")  # two imports away, inside a function
    changed = code_digest(["tasks.stage"], root)
    assert changed != before
    data = tmp_path / "data.txt"
    data.write_text("x")
    assert fingerprint("p", data, code=changed) != fingerprint("p", data, code=before)


def test_a_training_stages_code_includes_its_module_the_library_and_its_env() -> None:
    from tasks.runtime.fingerprint import PROJECT, stage_code

    names = {p.relative_to(PROJECT).as_posix() for p in code_files(["tasks.grpo", "envs.tictactoe"])}
    assert {
        "tasks/grpo.py",
        "tasks/runtime/trainer_args.py",
        "wander/training/checkpoints.py",
        "envs/tictactoe/env.py",
    } <= names
    assert not [n for n in names if n.startswith(("wander/ui/", "flows/", "tests/"))]
    # A stage runs no other stage's code: an edit to tasks/sft.py keeps the GRPO stages' checkpoints.
    assert "tasks/sft.py" not in names
    assert stage_code("tasks.grpo", "tictactoe") != stage_code("tasks.grpo", "reverse_text")
    # Without code, a fingerprint is what it was (the synthesis journal's names stay valid).
    assert fingerprint({"a": 1}) == digest({"params": {"a": 1}, "inputs": []})
