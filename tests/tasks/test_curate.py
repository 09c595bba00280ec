"""The curate stage: filters, dedupe and balance with counts; validated SFT data; failures overwrite nothing."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from envs.tictactoe.board import optimal_moves
from envs.tictactoe.render import parse_board
from envs.tictactoe.symmetry import SYMMETRIES, transform_game
from tasks import curate
from tasks.runtime.validation import DataValidationError, InputError
from wander.core.atomic_io import read_jsonl, write_jsonl


@pytest.fixture
def params(tmp_path: Path, params_at, shared_params: dict, synthesized: dict, base_model: Path) -> dict:
    """Smoke params under tmp_path, with copies of the shared teacher episodes; the base model is shared."""
    params = params_at(tmp_path)
    shutil.copytree(shared_params["layout"]["episodes"], params["layout"]["episodes"])
    params["layout"]["base_model"] = str(base_model)
    return params


def sft_rows(params: dict, split: str = "train") -> list[dict]:
    return read_jsonl(Path(params["layout"]["sft"]) / f"{split}.jsonl")


def test_sft_data_is_clean_balanced_and_counted(params: dict, stage_config) -> None:
    metrics = curate.run(stage_config("curate", params, balance=True, max_imbalance=0.1, augment=True))
    train, held_out = sft_rows(params), sft_rows(params, "eval")
    rows = train + held_out
    assert metrics["input"] == metrics["kept"] + sum(metrics["dropped"].values())
    assert metrics["dropped"]["outcome"] > 0  # the teacher loses some games; none of them is kept
    played = [r for r in rows if r["copy"] == 0]
    assert (
        len(played) == metrics["kept"]
        and len(train) == metrics["train"] + metrics["copies"]
        and len(held_out) == metrics["eval"] > 0
    )
    assert {r["outcome"] for r in rows} <= {"win", "draw"}
    assert all(r["invalid_moves"] == 0 and r["format"] == 1.0 for r in rows)
    seeds = [r["seed"] for r in played]
    assert len(seeds) == len(set(seeds))
    per_stratum = [sum(r["stratum"] == g for r in played) for g in range(4)]
    assert len(set(per_stratum)) == 1 and per_stratum[0] > 0  # balanced to the smallest stratum
    for r in rows:
        roles = [m["role"] for m in r["messages"]]
        assert roles[0] in ("system", "user") and roles[-1] == "assistant"
        assert all(set(m) == {"role", "content"} for m in r["messages"])
        assert 0 < r["n_tokens"] <= metrics["max_length"]
    # augment: the board's images of each train game follow it; held-out games stay as played.
    assert all(r["copy"] == 0 for r in held_out) and metrics["copies"] > 2 * metrics["train"]
    by_game = {(r["seed"], r["copy"]): r for r in train}
    assert len(by_game) == len(train)
    for (seed, k), row in by_game.items():
        if k:
            game = by_game[seed, 0]
            assert {key: v for key, v in row.items() if key not in ("messages", "copy", "n_tokens")} == {
                key: v for key, v in game.items() if key not in ("messages", "copy", "n_tokens")
            }
            assert row["messages"] != game["messages"]
            assert row["messages"] in [transform_game(game["messages"], s, "board") for s in SYMMETRIES[1:]]
        for i, m in enumerate(row["messages"]):  # every move of every copy keeps the minimax value
            if m["role"] == "assistant":
                board = parse_board(row["messages"][i - 1]["content"])
                assert int(m["content"][len("<move>")]) in optimal_moves(board)
    report = json.loads((Path(params["layout"]["sft"]) / "validation.json").read_text())
    assert report["success"] and report["rows"] == len(rows)
    # DVC's metrics file: a flat headline; the details file (a plain out) holds drops, strata and outcomes.
    metrics_dir = Path(params["layout"]["metrics"])
    headline = json.loads((metrics_dir / "curate.json").read_text())
    assert headline["games"] == metrics["input"] and headline["kept"] == len(played)
    assert headline["keep_rate"] == round(len(played) / metrics["input"], 4)
    assert headline["copies"] == metrics["copies"] == len(train) - metrics["train"]
    assert all(isinstance(v, (int, float)) for v in headline.values()) and len(headline) <= 6
    assert json.loads((Path(params["layout"]["details"]) / "curate.json").read_text()) == metrics


def test_same_input_gives_the_same_bytes(params: dict, stage_config, tmp_path: Path) -> None:
    curate.run(stage_config("curate", params))
    first = (Path(params["layout"]["sft"]) / "train.jsonl").read_bytes()
    curate.run(stage_config("curate", params))
    assert (Path(params["layout"]["sft"]) / "train.jsonl").read_bytes() == first


def test_every_filter_drops_and_counts_its_games(params: dict, stage_config) -> None:
    path = Path(params["layout"]["episodes"]) / "episodes.jsonl"
    episodes = read_jsonl(path)
    # Games every filter keeps (the solver's move_optimality filter included), so each damage is the only fault.
    good = [e for e in episodes if e["state"]["outcome"] != "loss" and e["values"]["move_optimality"] >= 1.0]
    extra = []
    for i, damage in enumerate(["error", "invalid", "format", "same_seed", "same_game"]):
        e = copy.deepcopy(good[i])
        if damage == "error":
            e["error"] = "env_response: ValueError: boom"
        elif damage == "invalid":
            e["state"]["invalid"] = 1
        elif damage == "format":
            e["values"]["format"] = 0.5
        elif damage == "same_game":
            e["seed"] = e["spec"]["seed"] = 10**9 + i  # another seed, the very same conversation
        extra.append(e)
    write_jsonl(path, episodes + extra)
    metrics = curate.run(
        stage_config("curate", params, balance=False, max_imbalance=1.0, dedupe=True, augment=True)
    )
    dropped = metrics["dropped"]
    written = sft_rows(params) + sft_rows(params, "eval")
    keys = [curate.game_key(r["messages"]) for r in written]  # with dedupe, no copy repeats a game either
    assert len(keys) == len(set(keys)) and metrics["copies"] > 0
    assert dropped["errored"] == 1 and dropped["invalid_moves"] == 1 and dropped["format"] == 1
    assert (
        dropped["duplicates"] >= 2
    )  # the repeated seed and the repeated game (plus any the teacher repeated)
    assert dropped["balance"] == 0
    assert 10**9 + 4 not in {r["seed"] for r in sft_rows(params) + sft_rows(params, "eval")}


def test_conversations_longer_than_the_context_are_rejected_and_nothing_is_overwritten(
    params: dict, stage_config
) -> None:
    out = Path(params["layout"]["sft"])
    out.mkdir(parents=True)
    (out / "train.jsonl").write_text("previous sft data\n")
    with pytest.raises(DataValidationError) as e:
        curate.run(stage_config("curate", params, max_length=8))
    message = str(e.value)
    assert message.startswith("validation of 'sft data' failed: 1 of")
    assert (
        "on column 'n_tokens' (min_value=1.0, max_value=8.0) [every conversation SFT trains on fits the model's "
        "context]" in message
    )
    assert "rows unexpected, e.g." in message
    assert (out / "train.jsonl").read_text() == "previous sft data\n"
    assert sorted(p.name for p in out.iterdir()) == ["train.jsonl"]
    assert not (Path(params["layout"]["metrics"]) / "curate.json").exists()
    assert not (Path(params["layout"]["details"]) / "curate.json").exists()


def test_unbalanced_strata_fail_validation(params: dict, stage_config) -> None:
    path = Path(params["layout"]["episodes"]) / "episodes.jsonl"
    episodes = read_jsonl(path)
    write_jsonl(path, [e for e in episodes if e["spec"]["stratum"] != 3 or e["seed"] % 4 == 0])
    with pytest.raises(
        DataValidationError, match=r"column 'stratum_count' .*strata balanced within 10% of the mean"
    ):
        curate.run(stage_config("curate", params, balance=False, max_imbalance=0.1))


def test_games_that_do_not_replay_are_refused_each_named(params: dict, stage_config) -> None:
    """Labels are not trusted: every kept game is replayed; edited boards, refused moves, relabelled losses stop."""
    path = Path(params["layout"]["episodes"]) / "episodes.jsonl"
    episodes = read_jsonl(path)
    kept = [e for e in episodes if e["state"]["outcome"] != "loss" and e["values"]["move_optimality"] >= 1.0]
    # The edited board is a later one, so a game of two turns at least: a mid-game start can end on its first move.
    board = next(e for e in kept if sum(m["role"] == "user" for m in e["messages"]) >= 2)
    move, refusal = [e for e in kept if e is not board][:2]
    user_turn = next(i for i, m in enumerate(board["messages"]) if m["role"] == "user" and i > 1)
    board["messages"][user_turn]["content"] = "X\nXXX/XXX/XXX"
    move["messages"][[i for i, m in enumerate(move["messages"]) if m["role"] == "assistant"][0]][
        "content"
    ] = "<move>42</move>"
    refusal["messages"][-1]["content"] = "I refuse to play"
    lost = next(e for e in episodes if e["state"]["outcome"] == "loss" and e["state"]["invalid"] == 0)
    lost["state"]["outcome"] = "win"
    lost["values"].update(win=1.0, loss=0.0, move_optimality=1.0)
    write_jsonl(path, episodes)
    out = Path(params["layout"]["sft"])
    with pytest.raises(InputError) as e:
        curate.run(stage_config("curate", params, balance=False))
    message = str(e.value)
    assert (
        message.startswith(f"{path}: 4 of ")
        and "kept games do not replay in the tictactoe environment" in message
    )
    lines = {line.split(":")[0]: line for line in message.splitlines()[1:-1]}
    assert (
        "is 'X\\nXXX/XXX/XXX' but the environment says"
        in lines[f"  - game seed {board['seed']} (record {episodes.index(board) + 1})"]
    )
    assert "'<move>42</move>'" in lines[f"  - game seed {move['seed']} (record {episodes.index(move) + 1})"]
    assert (
        "'I refuse to play'"
        in lines[f"  - game seed {refusal['seed']} (record {episodes.index(refusal) + 1})"]
    )
    assert "state 'outcome' is recorded as 'win', the environment says 'loss'" in message
    assert message.endswith(
        "nothing was written; regenerate the games (dvc repro synthesize) or use an env section that matches them"
    )
    assert not out.exists()


def test_a_curation_that_keeps_no_game_is_refused_with_its_filters_before_any_check(
    params: dict, stage_config
) -> None:
    """A judge that fails every teacher game (issue 67's 135M judge) must not reach the data checks' column noise."""
    out = Path(params["layout"]["sft"])
    with pytest.raises(InputError) as e:
        curate.run(stage_config("curate", params, min_values={"move_optimality": 2.0}))
    message = str(e.value)
    total = len(read_jsonl(Path(params["layout"]["episodes"]) / "episodes.jsonl"))
    assert f"curation kept 0 of {total} teacher games (dropped by filter: " in message
    assert "move_optimality " in message and "curate.min_values" in message
    assert not out.exists() or not any(out.iterdir())
