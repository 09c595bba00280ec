"""The chess environment: rules as python-chess plays them, the engine as opponent, teacher and judge, the
rubric, adjudication, and no Stockfish process left behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import chess
import pytest

from envs.chess.engine import find_stockfish
from envs.chess.game import adjudicate
from envs.chess.render import parse_position, position_text, read_move, user_message
from wander import load_environment
from wander.core.process_tree import alive

# The players' budgets are the defaults; the judge searches twice theirs, not the default's ten times: fast tests.
SMALL = {"num_train": 24, "num_eval": 16, "num_test": 16, "judge_nodes": 4000}
# Perft counts of standard positions (chessprogramming.org's "Perft Results"), depths 1 and 2.
PERFT = {
    chess.STARTING_FEN: (20, 400),
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1": (48, 2039),  # Kiwipete
    "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1": (14, 191),
    "r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1": (6, 264),
    "rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8": (44, 1486),
}
# 1. e4 e5 2. Nf3 Qg5?: the model (white) to move; the knight takes the queen.
HANGING_QUEEN = {
    "seed": 1,
    "stratum": 0,
    "random_move_prob": 0.0,
    "model_white": True,
    "start_moves": ["e2e4", "e7e5", "g1f3", "d8g5"],
}
UCI_TEXTS = [
    a + b + p for a in chess.SQUARE_NAMES for b in chess.SQUARE_NAMES for p in ("", "q", "r", "b", "n")
]


@pytest.fixture(scope="module")
def env():
    env = load_environment("chess", **SMALL)
    yield env
    env.close()


def listed(board: chess.Board, reply_format: str = "uci") -> list[chess.Move]:
    """The moves the env's user message lists at `board`, each read back through the env's legality check."""
    text = user_message("", board, "fen", reply_format, legal=True).rsplit("Legal moves:\n", 1)[1]
    return [read_move(board, t, reply_format) for t in text.split(",")]


@pytest.mark.parametrize("fen", list(PERFT))
def test_the_moves_listed_and_accepted_agree_with_perft_counts(fen: str) -> None:
    board = chess.Board(fen)
    first = listed(board)
    assert None not in first and len(set(first)) == len(first)
    # The legality check takes exactly the listed moves: every UCI text tried, king-takes-rook castling refused.
    assert {m for t in UCI_TEXTS if (m := read_move(board, t, "uci"))} == set(first)
    second = 0
    for move in first:
        board.push(move)
        second += len(listed(board)) if board.outcome() is None else 0
        board.pop()
    assert (len(first), second) == PERFT[fen]
    assert set(listed(board, "san")) == set(first)  # SAN lists and reads back the same moves


def test_both_renderings_read_back_to_the_position() -> None:
    board = chess.Board(list(PERFT)[1])
    for rendering in ("fen", "board"):
        back = parse_position(position_text(board, rendering))
        assert back is not None and back.board_fen() == board.board_fen()
        assert (back.turn, back.castling_rights, back.ep_square) == (
            board.turn,
            board.castling_rights,
            board.ep_square,
        )


def test_splits_are_fixed_by_their_seed_and_stratified(env) -> None:
    train = env.get_dataset("train").to_list()
    assert train == load_environment("chess", **SMALL).get_dataset("train").to_list()
    assert {r["stratum"] for r in train} == set(range(4))
    for row in train:
        low, high = row["stratum"] / 4, (row["stratum"] + 1) / 4
        assert low <= row["random_move_prob"] <= high and len(row["start_moves"]) <= 4
    assert all(len(row["start_moves"]) == 4 for row in env.get_dataset("eval"))  # envs/chess/openings.py


def test_games_replay_exactly(env) -> None:
    teacher = env.teacher_policy(0.3, seed=5)
    first = [ep.state["moves"] for ep in env.evaluate(teacher, split="eval").trajectories]
    again = load_environment("chess", **SMALL)
    try:
        assert [ep.state["moves"] for ep in again.evaluate(teacher, split="eval").trajectories] == first
    finally:
        again.close()


def test_the_engines_best_move_never_loses_to_the_random_mover_and_loses_few_centipawns(env) -> None:
    specs = env.suite_specs(["random"], 8, seed=0)
    result = env.evaluate(env.scripted_policy("stockfish-0"), specs=specs)
    outcomes = [ep.state["outcome"] for ep in result.trajectories]
    assert "loss" not in outcomes and outcomes.count("win") >= 14
    random_mover = env.evaluate(env.scripted_policy("random"), specs=specs[::4]).metrics["acpl"]["mean"]
    # The deeper judge finds the players' engine's moves imperfect, yet far better than random moves.
    assert 0.0 < result.metrics["acpl"]["mean"] < random_mover / 5
    assert result.metrics["legal_rate"]["mean"] == 1.0


def test_a_hanging_queen_left_is_a_blunder_and_taking_it_wins_at_adjudication() -> None:
    spec = HANGING_QUEEN
    env = load_environment("chess", max_turns=1, **SMALL)
    try:
        env.reset(spec=spec)
        _, reward, done, info = env.step("<move>f3g5</move>")
        assert done and env.episode.state["outcome"] == "win" and env.episode.state["ending"] == "adjudicated"
        assert env.episode.state["final_eval"] >= 300 and info["values"]["acpl"] == 0.0
        env.reset(spec=spec)
        _, _, _, info = env.step("<move>a2a3</move>")
        assert info["values"]["blunders"] == 1.0 and info["values"]["acpl"] >= 500
        assert env.episode.state["outcome"] == adjudicate(env.episode.state["final_eval"], 300)
    finally:
        env.close()


def test_adjudication_follows_the_stated_rule() -> None:
    assert [adjudicate(cp, 300) for cp in (300, 299, 0, -299, -300, 10_000, -10_000)] == [
        "win",
        "draw",
        "draw",
        "draw",
        "loss",
        "win",
        "loss",
    ]


def test_an_illegal_or_unreadable_reply_is_reprompted_on_the_same_position_and_counted(env) -> None:
    spec = env.get_dataset("eval")[0]
    first = env.reset(spec=spec)
    fen = parse_position(first).fen()
    observation, _, done, info = env.step("<move>a1a1</move>")
    assert not done and "a1a1 is not a legal move here" in observation
    assert parse_position(observation).fen() == fen
    observation, _, done, _ = env.step("I resign")
    assert not done and "Reply with one move inside <move></move>" in observation
    assert env.episode.state["illegal"] == 2 and env.episode.state["model_moves"] == 0
    assert info["state"]["turn"] == 1 and not {"cp_losses", "blunder_moves", "final_eval"} & set(
        info["state"]
    )


def test_any_reply_scores_without_error(env) -> None:
    for reply in (
        "",
        "<move></move>",
        "<move>e2e4 e7e5</move>",
        "<move>" + "x" * 5000 + "</move>",
        "<move>Nf3",
    ):
        env.reset(spec=env.get_dataset("eval")[1])
        done = False
        while not done:
            _, reward, done, info = env.step(reply)
        assert (
            info["error"] is None and env.episode.state["outcome"] == "loss"
        )  # out of turns on illegal replies
        assert env.episode.state["ending"] == "forfeit" and info["values"]["adjudicated"] == 0.0
        assert info["values"]["illegal_moves"] == env.max_turns and info["values"]["legal_rate"] == 0.0


def test_the_teachers_slips_are_blunders_that_curation_drops(env) -> None:
    sloppy = env.evaluate(env.teacher_policy(0.3, seed=1), split="eval")
    kept = [ep for ep in sloppy.trajectories if ep.values["no_blunders"] == 1.0]
    assert sloppy.metrics["blunders"]["mean"] > 0 and 0 < len(kept) < len(sloppy.trajectories)
    assert env.curation_defaults()["min_values"] == {"no_blunders": 1.0}


def test_the_engines_close_with_the_env() -> None:
    env = load_environment("chess", **SMALL)
    env.evaluate(env.scripted_policy("random"), n=2, split="eval")
    pids = env.pool.pids
    assert pids and all(alive(p) for p in pids)
    env.close()
    assert not any(alive(p) for p in pids)


def test_no_engine_outlives_a_killed_process() -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from wander import load_environment
        env = load_environment("chess", num_train=8, num_eval=4, num_test=4, engines=2)
        env.evaluate(env.scripted_policy("random"), n=4, split="eval")
        print(" ".join(map(str, env.pool.pids)), flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert pids and all(alive(p) for p in pids)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in pids)


def test_a_missing_engine_is_named_with_the_fix() -> None:
    with pytest.raises(FileNotFoundError, match="make stockfish"):
        find_stockfish("/nonexistent/stockfish")
    assert find_stockfish()


def test_a_process_that_never_closes_its_env_still_exits() -> None:
    script = (
        "from wander import load_environment\n"
        "env = load_environment('chess', num_train=8, num_eval=4, num_test=4)\n"
        "env.evaluate(env.scripted_policy('random'), n=2, split='eval')\n"
        "print(' '.join(map(str, env.pool.pids)), flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not any(alive(int(p)) for p in done.stdout.split())


def test_the_engine_values_replies_so_grpo_finds_the_models_mistakes() -> None:
    from wander.core.policy import Reply
    from wander.training.decision_rollout import reply_losses

    env = load_environment("chess", max_turns=1, **SMALL)
    try:
        episode = env.start(HANGING_QUEEN)
        candidates = env.candidate_replies(episode)
        assert sorted(
            read_move(parse_position(episode.messages[-1]["content"]), c[6:-7], "uci").uci()
            for c in candidates
        ) == sorted(m.uci() for m in env.board_of(episode.state).legal_moves)
        values = env.best_outcomes([(episode, Reply(c)) for c in candidates])
        best = max(zip(candidates, values, strict=True), key=lambda pair: pair[1]["reward"])
        assert best[0] == "<move>f3g5</move>" and best[1]["move_quality"] == 1.0 and best[1]["outcome"] > 0.9
        take, pass_, nonsense = reply_losses(
            env, [episode] * 3, [Reply("<move>f3g5</move>"), Reply("<move>a2a3</move>"), Reply("nonsense")]
        )
        assert take == 0.0 and 0.3 < pass_ < nonsense  # leaving the queen costs; no move at all costs more
    finally:
        env.close()
