"""Games of `wander ui` without a browser: a person as the board game's opponent gets the env's own episode; bad
input is refused with a reason; any env can be played by typing the policy's turns; the evaluation's episode file
holds every game with its cell."""

from __future__ import annotations

import html

import httpx
import pytest

from envs.tictactoe import MinimaxPlayer
from wander import load_environment
from wander.core.capabilities import BoardGame
from wander.core.replay import replay_problems
from wander.eval.config import EvaluateConfig
from wander.eval.episodes_file import read_episodes, write_episodes
from wander.eval.matrix import run_matrix
from wander.policies.openai_server import serve_in_thread
from wander.ui.app import create_app
from wander.ui.play import Games, PlayError, new_game, person_move, typed_turn
from wander.ui.run_config import RunConfig
from wander.ui.run_files import RunFiles, RunMissing

from ...envs.scripted import Says
from .conftest import post_form

SETTINGS = dict(rendering="compact", num_groups=2, num_train=32, num_eval=8, num_test=8)


@pytest.fixture(scope="module")
def env():
    return load_environment("tictactoe", **SETTINGS)


@pytest.mark.parametrize("side", ["first", "second"])
def test_a_person_plays_the_envs_own_game_against_minimax(env, side):
    assert isinstance(env, BoardGame)
    game = new_game(Games(seed=3), env, "minimax", MinimaxPlayer(0.0, seed=0), side)
    person_cells = []
    while not game.done:
        cell = game.position().moves[-1]
        person_move(game, cell)
        person_cells.append(int(cell))
    ep = game.episode
    assert ep.state["outcome"] in ("win", "draw") and set(ep.values) == set(env.rubric.names)
    # The same game is the env's own: its opponent forced to the person's moves replays to the same record.
    record = {**ep.to_dict(), "spec": {**game.spec, "forced_replies": person_cells}}
    assert replay_problems(env, record) == []
    assert [t.who for t in game.turns].count("person") == len(person_cells)
    assert game.person_mark == ("X" if side == "first" else "O")


def test_bad_moves_and_invalid_replies(env):
    game = new_game(Games(), env, "says", Says("hello", "<move>9</move>", "<move>4</move>"), "second")
    # Two invalid replies, shown as such, then a move held for the person's answer.
    assert [(t.raw, t.valid) for t in game.turns] == [
        ("hello", False),
        ("<move>9</move>", False),
        ("<move>4</move>", True),
    ]
    assert game.episode.state["invalid"] == 2 and game.position().squares[4] == "X"
    for text, reason in [
        ("nine", "'nine' is not a move here: give a free cell's number, one of 0, 1, 2, 3, 5,"),
        ("4", "'4' is not a move here"),
        ("12", "'12' is not a move here"),
    ]:
        with pytest.raises(PlayError, match=reason):
            person_move(game, text)
    with pytest.raises(PlayError, match="in a board game you play the opponent"):
        typed_turn(
            game, "<move>0</move>"
        )  # a typed turn would skip the held move: refused, the game unchanged
    assert game.position().squares[4] == "X" and len(game.turns) == 3
    with pytest.raises(PlayError, match="no game 'x'"):
        Games().get("x")
    with pytest.raises(PlayError, match="choose 'first' or 'second'"):
        new_game(Games(), env, "says", Says(), "middle")


def test_the_policy_ending_the_game_on_its_move_ends_it(env):
    game = new_game(
        Games(), env, "says", Says("<move>0</move>", "<move>1</move>", "<move>2</move>"), "second"
    )
    person_move(game, "3")
    person_move(game, "4")
    assert game.done and game.episode.state["outcome"] == "win" and game.position().moves == ()
    with pytest.raises(PlayError, match="over"):
        person_move(game, "5")


def test_any_env_by_typing_the_policys_turns():
    env = load_environment("reverse_text", num_train=8, num_eval=4, num_test=4)
    assert not isinstance(env, BoardGame)
    game = new_game(Games(), env, "says", Says("from the policy"), "first")
    assert not game.board_game
    while not game.done:
        typed_turn(game, "my reply")
    assert game.turns[0].who == "person" and set(game.episode.values) == set(env.rubric.names)
    with pytest.raises(PlayError, match="this game has no board"):
        person_move(game, "4")
    with pytest.raises(PlayError, match="over"):
        typed_turn(game, None)


def test_the_episode_file_holds_every_game_with_its_cell(env, tmp_path):
    config = EvaluateConfig(
        policies={"random": "random"}, opponents=["random", "minimax-0"], games=3, baseline=None
    )
    result = run_matrix(config, env=env)
    write_episodes(result, tmp_path / "episodes.jsonl.gz")
    records = read_episodes(tmp_path / "episodes.jsonl.gz")
    assert len(records) == sum(row["games"] for row in result.rows) == 12 * len(result.policies)
    for row in result.rows:
        cell = [
            r
            for r in records
            if (r["policy"], r["opponent"], r["side"]) == (row["policy"], row["opponent"], row["side"])
        ]
        assert len(cell) == 3 and sum(r["values"]["win"] for r in cell) == round(row["win"] * 3)
    with pytest.raises(FileNotFoundError, match="run the evaluate stage"):
        read_episodes(tmp_path / "none.jsonl.gz")


def test_a_folder_without_a_run_says_so(tmp_path):
    run = RunFiles(RunConfig(tmp_path))
    with pytest.raises(RunMissing, match="run the pipeline first"):
        run.episodes()
    assert run.stage_metrics() == {} and run.lineage() == []


def test_a_missing_run_is_a_message_on_each_page(tmp_path):
    with serve_in_thread(create_app(RunConfig(tmp_path)), api_path="", probe_path="/play") as url:
        episodes = httpx.get(url + "/episodes", timeout=30)
        curves = httpx.get(url + "/curves", timeout=30)
        champion = post_form(url, "/play/new", {"policy": "champion", "side": "first"})
    assert episodes.status_code == 404 and "run the pipeline first (`make run`)" in html.unescape(
        episodes.text
    )
    assert curves.status_code == 404 and "no pipeline run in" in curves.text
    assert (
        champion.status_code == 400 and "no registered champion: no tracking store connected" in champion.text
    )


def test_a_model_plays_each_env_with_that_envs_reply_budget(run_root, run_config):
    from wander.ui.app import UIState

    state = UIState(run_config)
    folder = str(run_root / "data/models/base")
    budgets = {}
    for name in ("tictactoe", "reverse_text"):
        env = state.environment(name)
        budgets[name] = state.policy(folder, env).max_new_tokens
        assert budgets[name] == env.reply_tokens()
    # a move fits in 16 tokens; a reversal needs its longest text's (74 with reverse_text's own 3 strata), more
    # than the 64 every env was once cut at
    assert budgets == {"tictactoe": 16, "reverse_text": 74}


def test_the_form_suggests_each_envs_scripted_players(run_config):
    from wander.ui.app import UIState
    from wander.ui.play_view import new_game_form

    state = UIState(run_config)
    for env_name, players in (("tictactoe", ("minimax", "random")), ("chess", ("random", "stockfish"))):
        form = new_game_form(state, env_name=env_name)
        assert all(f'<option value="{p}">' in form for p in (*players, "teacher", "champion")), env_name
    assert '<option value="minimax">' not in new_game_form(state, env_name="chess")
    assert '<option value="teacher">' not in new_game_form(
        state, env_name="os"
    )  # not an env: nothing to suggest
