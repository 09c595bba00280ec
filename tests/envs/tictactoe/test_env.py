"""The tic-tac-toe environment: scripted matches, turn rules, rubric, dataset, game API."""

import pytest

from envs.tictactoe import MinimaxPlayer, RandomPlayer
from envs.tictactoe.board import EMPTY_BOARD, is_over, play, to_move, winner
from envs.tictactoe.game import live_positions
from envs.tictactoe.players import scripted_player
from envs.tictactoe.render import parse_board, render_board, user_message
from wander import Reply, load_environment


def perfect_opponent_env(**kw):
    return load_environment("tictactoe", rendering="compact", random_move_prob=(0.0, 0.0), **kw)


def test_minimax_against_minimax_draws_every_game_over_1000_seeds():
    env = perfect_opponent_env(num_eval=1000)
    result = env.evaluate(MinimaxPlayer(0.0, seed=1))
    outcomes = {ep.state["outcome"] for ep in result.trajectories}
    assert outcomes == {"draw"}
    assert len(result.trajectories) == 1000
    assert {ep.spec["model_starts"] for ep in result.trajectories} == {True, False}
    assert result.metrics["move_optimality"]["mean"] == 1.0


def test_random_never_beats_perfect_minimax_and_reruns_are_identical():
    env = perfect_opponent_env(num_eval=1000)
    first = env.evaluate(RandomPlayer(seed=3))
    again = perfect_opponent_env(num_eval=1000).evaluate(RandomPlayer(seed=3))
    assert first.metrics["win"]["mean"] == 0.0
    assert first.metrics["loss"]["mean"] > 0.7
    assert [ep.messages for ep in first.trajectories] == [ep.messages for ep in again.trajectories]
    assert first.metrics == again.metrics


class Scripted:
    """Replies from a fixed list, the same for every conversation."""

    def __init__(self, replies):
        self.replies, self.turn = list(replies), 0

    def __call__(self, conversations):
        reply = self.replies[min(self.turn, len(self.replies) - 1)]
        self.turn += 1
        return [Reply(reply) for _ in conversations]


def first_spec(env, starts: bool) -> dict:
    return next(r for r in env.get_dataset("eval") if r["model_starts"] == starts)


def test_invalid_moves_reprompt_on_the_same_board_and_use_turns():
    env = perfect_opponent_env()
    spec = first_spec(env, starts=True)
    [ep] = env.rollout(Scripted(["no tags", "<move>9</move>", "<move>4</move>", "<move>4</move>"]), [spec])
    users = [m["content"] for m in ep.messages if m["role"] == "user"]
    assert "Invalid: use <move>N</move>." in users[1] and "Invalid: 9 not 0-8." in users[2]
    assert parse_board(users[0]) == parse_board(users[1]) == parse_board(users[2]) == "." * 9
    assert "Invalid: 4 taken." in users[4]
    assert ep.state["invalid"] == 7  # no tags, 9, and five replays of the taken cell 4
    assert ep.state["outcome"] == "loss" and ep.state["turn"] == 8  # ran out of turns
    assert ep.values["any_invalid"] == 1.0 and ep.values["invalid_moves"] == 7.0
    assert ep.reward == pytest.approx(
        0.0 + 0.2 * ep.values["format"] - 0.1 * 7
    )  # the penalty is per invalid move
    assert ep.messages[-1]["role"] == "assistant"


def test_the_move_on_the_last_allowed_turn_is_applied():
    env = perfect_opponent_env(max_turns=4)
    ep = env.start(first_spec(env, starts=True))
    env.advance(ep, Reply("<move>0</move>"))
    env.advance(ep, Reply("bad"))
    env.advance(ep, Reply("bad"))
    board = ep.state["board"]
    free = [c for c in range(9) if board[c] == "."]
    env.advance(ep, Reply(f"<move>{free[0]}</move>"))
    assert ep.done and ep.state["turn"] == 4
    assert ep.state["board"].count("X") == 2  # the last move was applied
    assert ep.state["model_moves"] == 2 and ep.state["outcome"] == "loss"  # game unfinished: out of turns


def test_last_turn_winning_move_scores_a_win():
    env = load_environment("tictactoe", random_move_prob=(1.0, 1.0), max_turns=3, num_eval=400)
    wins = 0
    for spec in env.get_dataset("eval"):
        if not spec["model_starts"]:
            continue
        ep = env.start(spec)
        for cell in (0, 1, 2):
            if ep.done:
                break
            move = cell if ep.state["board"][cell] == "." else 8
            env.advance(ep, Reply(f"<move>{move}</move>"))
        if ep.state["board"][:3] == "XXX":
            env.score([ep])
            assert ep.state["outcome"] == "win" and ep.values["win"] == 1.0 and ep.state["turn"] == 3
            wins += 1
    assert wins > 10


def test_opponent_replies_identically_to_identical_positions_within_a_seed():
    env = load_environment("tictactoe", random_move_prob=(0.5, 0.5))
    spec = first_spec(env, starts=True)
    group = env.rollout(Scripted(["<move>4</move>", "<move>0</move>", "<move>8</move>"]), [spec] * 8)
    assert len({tuple(m["content"] for m in ep.messages) for ep in group}) == 1


def test_dataset_splits_are_deterministic_disjoint_and_stratified():
    env = load_environment("tictactoe", num_train=400, num_eval=100, num_test=100, num_groups=4)
    again = load_environment("tictactoe", num_train=800, num_eval=100, num_test=100, num_groups=4)
    assert env.get_dataset("eval").to_list() == again.get_dataset("eval").to_list()  # frozen eval
    seeds = {s: set(env.get_dataset(s)["seed"]) for s in ("train", "eval", "test")}
    assert (
        len(seeds["train"]) == 400
        and not (seeds["train"] & seeds["eval"])
        and not (seeds["eval"] & seeds["test"])
    )
    train = env.get_dataset("train")
    for i in range(0, 400, 4):  # every window of num_groups specs covers every stratum
        window = train.select(range(i, i + 4))
        assert sorted(window["stratum"]) == [0, 1, 2, 3]
        for row in window:
            assert row["stratum"] * 0.25 <= row["random_move_prob"] <= (row["stratum"] + 1) * 0.25


def test_game_api_reset_step():
    env = perfect_opponent_env()
    obs = env.reset(seed=12345)
    assert parse_board(obs) is not None
    done, reward, steps = False, 0.0, 0
    player = MinimaxPlayer(0.0, seed=0)
    while not done:
        action = player([[{"role": "user", "content": obs}]])[0].content
        obs, reward, done, info = env.step(action)
        steps += 1
    assert info["state"]["outcome"] == "draw" and reward == pytest.approx(0.5 + 0.2)
    with pytest.raises(RuntimeError, match="reset"):
        env.step("<move>1</move>")
    assert env.reset(seed=12345) == env.reset(seed=12345)


def test_renderings_round_trip_through_parse_board():
    for rendering in ("grid", "compact", "board", "spaced", "lines"):
        for board in ("." * 9, "XO.X.O..X", "XOXOXOOXO"):
            assert parse_board(render_board(board, rendering)) == board


def test_grid_rendering_plays_the_same_game():
    grid = load_environment("tictactoe", rendering="grid", num_eval=50).evaluate(MinimaxPlayer(0.2, seed=5))
    compact = load_environment("tictactoe", rendering="compact", num_eval=50).evaluate(
        MinimaxPlayer(0.2, seed=5)
    )
    assert [e.state["board"] for e in grid.trajectories] == [e.state["board"] for e in compact.trajectories]
    assert "---+---+---" in grid.trajectories[0].messages[1]["content"]


def test_spaced_gives_every_cell_its_own_line_position_and_keeps_the_mark_last():
    text = user_message("O", "XX.O.O...", "spaced")
    assert text == "X X 2\nO 4 O\n6 7 8\nO"
    assert parse_board(text) == "XX.O.O..."
    assert parse_board("X X 2\nO 4 O\n6 7 5") is None  # a digit that does not name its cell is no board


def test_bad_settings_name_the_problem():
    with pytest.raises(TypeError, match="unknown tictactoe setting"):
        load_environment("tictactoe", max_turn=3)
    with pytest.raises(ValueError, match="random_move_prob"):
        load_environment("tictactoe", random_move_prob=(0.5, 0.2))
    with pytest.raises(ValueError, match="unknown scripted player"):
        scripted_player("alphazero")
    with pytest.raises(ValueError, match="unknown environment"):
        load_environment("go")


def test_specs_dir_gives_the_splits_seeds_and_strata_with_the_configs_skill_range(tmp_path) -> None:
    import json

    from wander import load_environment

    generated = load_environment("tictactoe", num_train=40, seed=5)  # as the generate stage writes them
    rows = generated.get_dataset("train").to_list()
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    stage = load_environment("tictactoe", specs_dir=str(tmp_path), random_move_prob=(0.2, 0.7))
    specs = stage.get_dataset("train").to_list()
    assert [(s["seed"], s["stratum"], s["model_starts"]) for s in specs] == [
        (r["seed"], r["stratum"], r["model_starts"]) for r in rows
    ]
    assert all(0.2 <= s["random_move_prob"] <= 0.7 for s in specs)
    assert load_environment("tictactoe", specs_dir=str(tmp_path)).get_dataset("train").to_list() == rows
    with pytest.raises(FileNotFoundError, match="eval.jsonl"):
        stage.get_dataset("eval")


def test_a_fork_plays_on_without_touching_the_episode_it_came_from():
    env = load_environment("tictactoe")
    spec = {"seed": 3, "random_move_prob": 0.0, "stratum": 0, "model_starts": True, "forced_replies": [4]}
    episode = env.start(spec)
    before = (list(episode.messages), dict(episode.state), list(episode.state["forced_replies"]))
    fork = episode.fork()
    env.advance(fork, Reply("<move>0</move>"))  # takes the forced reply out of the fork's state
    assert fork.state["board"] != episode.state["board"] and fork.state["forced_replies"] == []
    assert (episode.messages, episode.state, episode.state["forced_replies"]) == before
    env.advance(episode, Reply("<move>0</move>"))  # the original still plays the same move the same way
    assert episode.messages == fork.messages and episode.state == fork.state


def test_midgame_starts_only_in_train_and_from_a_live_position():
    env = load_environment("tictactoe", midgame_starts=0.25, num_train=800)
    train = env.get_dataset("train").to_list()
    midgame = [s for s in train if s["start_moves"]]
    assert 150 <= len(midgame) <= 250  # a quarter of 800, from the seeds
    assert not any(s["start_moves"] for split in ("eval", "test") for s in env.get_dataset(split).to_list())
    assert not any(s["start_moves"] for s in load_environment("tictactoe").get_dataset("train").to_list())
    for spec in midgame:
        episode = env.start(spec)
        board = episode.state["board"]
        assert board.count(".") == 9 - len(spec["start_moves"]) and winner(board) is None
        assert episode.state["mark"] == ("X" if spec["model_starts"] else "O") == to_move(board)
        assert episode.messages[-1]["content"] == user_message(episode.state["mark"], board, "board")
    # Positions are drawn alike (not plies): deep ones, where one move wins or saves the game, are covered.
    assert max(len(s["start_moves"]) for s in midgame) == 8
    positions = live_positions()
    boards = set()
    for moves in positions:
        board = EMPTY_BOARD
        for ply, cell in enumerate(moves):
            board = play(board, cell, "XO"[ply % 2])
        boards.add(board)
    assert len(positions) == len(boards) == 4519 and not any(map(is_over, boards))
    # The same seed starts from the same position (synthesis, curation's replay and GRPO agree).
    again = load_environment("tictactoe", midgame_starts=0.25, num_train=800).get_dataset("train").to_list()
    assert again == train


def test_system_prompt_replaces_the_renderings_own_and_the_game_plays_the_same() -> None:
    default = load_environment("tictactoe", num_eval=20)
    short = load_environment("tictactoe", num_eval=20, system_prompt="Tic-tac-toe.")
    assert default.system_prompt == ""  # board: no system message, so a chat template inserts its own default
    played = short.evaluate(MinimaxPlayer(0.2, seed=5)).trajectories
    assert all(e.messages[0] == {"role": "system", "content": "Tic-tac-toe."} for e in played)
    assert [e.state["board"] for e in played] == [
        e.state["board"] for e in default.evaluate(MinimaxPlayer(0.2, seed=5)).trajectories
    ]
    assert short.observation(played[0])[0]["role"] == "system"  # history "current" keeps it in every decision
