"""The judge: a search deeper than the opponent's and the teacher's, used wherever the env judges (a move's
centipawn loss, adjudication, GRPO's move values), never the players' budget; a judge no deeper than they is refused
when the settings are read."""

from __future__ import annotations

from pathlib import Path

import chess
import pytest

from envs.chess import ChessConfig, EnginePool
from envs.chess.engine import MATE_CP
from envs.chess.game import CP_CAP
from tasks.params.load import ParamsError, load_params, read_params
from wander import load_environment
from wander.core.policy import Reply

# Tiny budgets, the judge ten times the players', as the defaults are.
BUDGETS = {"opponent_nodes": 300, "teacher_nodes": 300, "judge_nodes": 3000}
SMALL = {"num_train": 8, "num_eval": 8, "num_test": 8, "max_turns": 6}
PARAMS = Path(__file__).parents[3] / "params.yaml"


def engine_games(**settings) -> list:
    """Six games (3 a colour) of the opponent's engine, never slipping, against the same engine."""
    env = load_environment("chess", **SMALL, **settings)
    try:
        specs = env.suite_specs(["stockfish-0"], 3, seed=0)
        return env.evaluate(env.scripted_policy("stockfish-0"), specs=specs).trajectories
    finally:
        env.close()


@pytest.fixture(scope="module")
def games() -> list:
    return engine_games(**BUDGETS)


def turns(episode) -> list[tuple[chess.Board, chess.Move, bool]]:
    """Each move of a game after its opening: the position before it, the move, and whether the model played it."""
    board, played = chess.Board(), []
    start = len(episode.spec["start_moves"])
    model = chess.WHITE if episode.state["color"] == "white" else chess.BLACK
    for k, uci in enumerate(episode.state["moves"]):
        move = chess.Move.from_uci(uci)
        if k >= start:
            played.append((board.copy(), move, board.turn == model))
        board.push(move)
    return played


def test_the_opponent_plays_at_its_budget_and_the_judge_scores_at_its_own(games) -> None:
    pool = EnginePool()
    try:
        losses = []
        for episode in games:
            judged = iter(episode.state["cp_losses"])
            for board, move, model in turns(episode):
                fen = board.fen()
                if not model:
                    assert move.uci() == pool.best(fen, BUDGETS["opponent_nodes"])[0]
                    continue
                best, best_cp = pool.best(fen, BUDGETS["judge_nodes"])
                cp = best_cp if move.uci() == best else pool.score_of(fen, move.uci(), BUDGETS["judge_nodes"])
                losses.append(min(max(0, best_cp - cp), CP_CAP))
                assert next(judged) == losses[-1]
            if episode.state["ending"] == "adjudicated":  # the opponent to move: its score, negated
                final = chess.Board()
                for uci in episode.state["moves"]:
                    final.push_uci(uci)
                cp = -pool.best(final.fen(), BUDGETS["judge_nodes"])[1]
                assert episode.state["final_eval"] == max(-MATE_CP, min(MATE_CP, cp))
        # The model is the players' engine: a judge at their budget would find it perfect; the deeper one does not.
        assert any(losses) and len(losses) == sum(len(e.state["cp_losses"]) for e in games)
    finally:
        pool.close()


def test_a_judge_at_the_players_budget_scores_their_engine_as_perfect_and_plays_the_same_games(games) -> None:
    nodes = BUDGETS["opponent_nodes"]
    old = engine_games(**{**BUDGETS, "judge_nodes": nodes, "allow_shallow_judge": True})
    assert [e.state["moves"] for e in old] == [e.state["moves"] for e in games]  # the judge never plays
    assert all(loss == 0 for e in old for loss in e.state["cp_losses"])
    assert any(loss > 0 for e in games for loss in e.state["cp_losses"])


def test_grpos_move_values_come_from_the_judge(games) -> None:
    # A position where the players' engine plays a move the judge finds worse than its own best.
    board, move, loss = next(
        (b, m, c)
        for e in games
        for (b, m), c in zip([(b, m) for b, m, mine in turns(e) if mine], e.state["cp_losses"], strict=True)
        if c > 0
    )
    env = load_environment("chess", **SMALL, **BUDGETS)
    try:
        spec = {
            "seed": 1,
            "stratum": 0,
            "random_move_prob": 0.0,
            "model_white": board.turn == chess.WHITE,
            "start_moves": [m.uci() for m in board.move_stack],
        }
        episode = env.start(spec)
        best = env.pool.best(board.fen(), BUDGETS["judge_nodes"])[0]
        players, judges = env.best_outcomes(
            [(episode, Reply(f"<move>{u}</move>")) for u in (move.uci(), best)]
        )
        assert players["move_quality"] == pytest.approx(1.0 - loss / CP_CAP) and judges["move_quality"] == 1.0
    finally:
        env.close()


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        (
            {"judge_nodes": 2000},
            r"judge_nodes \(2000\) must be above opponent_nodes \(2000\) and teacher_nodes",
        ),
        ({"teacher_nodes": 50_000}, r"teacher_nodes \(50000\).*raise judge_nodes above 50000"),
        ({"opponent_nodes": 20_000}, r"opponent_nodes \(20000\).*raise judge_nodes above 20000"),
    ],
)
def test_a_judge_no_deeper_than_the_players_is_refused_with_the_fix(settings: dict, named: str) -> None:
    with pytest.raises(ValueError, match=named) as refused:
        ChessConfig(**settings)
    assert "allow_shallow_judge" in str(refused.value)
    with pytest.raises(ValueError, match=named):
        load_environment("chess", **settings)
    assert ChessConfig(**settings, allow_shallow_judge=True).judge_nodes == settings.get(
        "judge_nodes", 20_000
    )


def test_the_pipeline_refuses_a_shallow_judge_when_it_reads_the_params() -> None:
    params = read_params(PARAMS, "llm-chess")
    params["env"]["chess"]["judge_nodes"] = 2000
    with pytest.raises(ParamsError, match=r"env\.chess.*judge_nodes \(2000\) must be above"):
        load_params(params=params)
    params["env"]["chess"]["allow_shallow_judge"] = True
    assert load_params(params=params).env.model_extra["chess"]["judge_nodes"] == 2000
