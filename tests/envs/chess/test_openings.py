"""Openings keep the splits apart by position: no eval, test or evaluation-suite game starts where a train game can,
at the split sizes the params profiles run chess with; eval and test never repeat a starting position."""

from __future__ import annotations

import json
from pathlib import Path

import chess
import pytest

from envs.chess.env import SUITE_GAMES
from envs.chess.openings import opening_board, position_key, position_share
from envs.chess.suite import DEFAULT_OPPONENTS
from tasks.params.load import read_params
from wander import load_environment

PARAMS = Path(__file__).parents[3] / "params.yaml"


def starts(specs: list[dict]) -> list[str]:
    """The position each spec's game starts from, after its opening plies (EPD: no move counters)."""
    return [position_key(opening_board(s["start_moves"])) for s in specs]


@pytest.mark.parametrize("profile", [None, "llm-chess", "smoke"])
def test_no_eval_or_test_game_starts_where_a_train_game_does(profile: str | None) -> None:
    params = read_params(PARAMS, profile)
    sizes = {k: params["generate"][k] for k in ("num_train", "num_eval", "num_test", "seed")}
    env = load_environment("chess", **sizes, **params["env"].get("chess", {}))
    games = params["evaluate"]["games"] or SUITE_GAMES
    train, eval_, test = (starts(env.split_specs(split)) for split in ("train", "eval", "test"))
    suite = starts(env.suite_specs(DEFAULT_OPPONENTS, games, params["evaluate"]["seed"]))
    assert (len(train), len(eval_), len(test)) == (sizes["num_train"], sizes["num_eval"], sizes["num_test"])
    assert not set(eval_) & set(train) and not set(test) & set(train) and not set(suite) & set(train)
    assert not set(eval_) & set(test) and not set(eval_) & set(suite)
    assert len(set(eval_)) == len(eval_) and len(set(test)) == len(test)  # no position twice in a split
    # The suite's cells draw their seeds apart, so two cells may share a start (3 of 60 games, 8 of 300), no more.
    assert len(set(suite)) >= 0.95 * len(suite)


def test_train_keeps_every_opening_length_and_the_initial_position() -> None:
    env = load_environment("chess")
    train = env.split_specs("train")
    assert position_share(chess.Board()) == "train"
    assert {len(s["start_moves"]) for s in train} == set(range(5))  # 0 to opening_plies, as before
    assert {len(s["start_moves"]) for s in env.split_specs("eval") + env.split_specs("test")} == {4}
    assert sum(not s["start_moves"] for s in train) > 0.15 * len(train)  # ~1 in 5 from the initial position


def test_generated_specs_replay_to_the_same_openings(tmp_path: Path) -> None:
    env = load_environment("chess", num_train=40, num_eval=20, num_test=20)
    for split in ("train", "eval", "test"):
        rows = [{"seed": s["seed"], "stratum": s["stratum"]} for s in env.split_specs(split)]
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    again = load_environment("chess", num_train=40, num_eval=20, num_test=20, specs_dir=str(tmp_path))
    for split in ("train", "eval", "test"):
        assert again.split_specs(split) == env.split_specs(split)


def test_too_few_openings_for_a_split_are_refused_with_the_fix() -> None:
    # One ply: two of the twenty first moves are eval's, far too few for 16 distinct eval games.
    env = load_environment("chess", opening_plies=1, num_train=8, num_eval=16, num_test=16)
    with pytest.raises(ValueError, match=r"eval split found 2 distinct.*raise env\.chess\.opening_plies"):
        env.split_specs("eval")
    with pytest.raises(ValueError, match="opening_plies must be at least 1"):
        load_environment("chess", opening_plies=0)
