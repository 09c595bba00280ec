"""The sft stage checks its input's schema first: a corrupt file names the file, the row and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks import sft
from tasks.runtime.stage import stage_main
from tasks.runtime.validation import InputError

GOOD = {
    "messages": [
        {"role": "user", "content": "012/345/678\nX"},
        {"role": "assistant", "content": "<move>4</move>"},
    ]
}


def write_rows(params: dict, *rows: object, raw: str = "") -> Path:
    path = Path(params["layout"]["sft"]) / "train.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + raw)
    return path


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ({"msgs": []}, "has no 'messages' key (it has ['msgs'])"),
        (
            {"messages": "hello"},
            "'messages' must be a non-empty list of {role, content} objects, got str \"hello\"",
        ),
        ({"messages": []}, "'messages' must be a non-empty list"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content must be a string, got int 5"),
        ({"messages": [{"content": "hi"}]}, "messages[0].role must be a string, got nothing"),
        (
            {"messages": [{"role": "narrator", "content": "hi"}]},
            "messages[0].role is 'narrator'; one of system",
        ),
        ({"messages": [{"role": "user", "content": "hi"}]}, "has no assistant message"),
        (["not", "an", "object"], "is a JSON list, not an object"),
    ],
)
def test_a_bad_row_is_named_before_training(tmp_path: Path, params_at, stage_config, bad, problem) -> None:
    params = params_at(tmp_path)
    path = write_rows(params, GOOD, bad, GOOD)
    with pytest.raises(InputError) as info:
        sft.run(stage_config("sft", params))
    message = str(info.value)
    assert message.startswith(f"{path}: 1 of 3 rows do not fit the SFT schema\n  - row 2: ")
    assert problem in message and message.endswith(sft.SFT_FIX)
    assert not (Path(params["layout"]["models"]) / "sft").exists()


def test_the_stage_command_prints_the_problem_not_a_traceback(tmp_path: Path, params_at, capsys) -> None:
    import yaml

    params = params_at(tmp_path)
    path = write_rows(params, GOOD, raw="{not json\n")
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(params))
    assert stage_main("sft", sft.run, ["--params", str(params_file), "--no-mlflow"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"sft: error: {path}:2: not a JSON line") and "Traceback" not in err
    assert "dvc repro curate" in err
