"""GRPO one decision per sample, for environments whose turns read only the current observation."""

from __future__ import annotations

import pytest
import torch

from envs.tictactoe.board import legal_moves, optimal_moves
from envs.tictactoe.exact import best_move
from envs.tictactoe.players import MinimaxPlayer, board_of
from wander import Reply, load_environment
from wander.core.capabilities import MissingCapability
from wander.eval.curves import curve_points
from wander.policies.scratch_model import load_tokenizer
from wander.training import RolloutConfig, trainer_spec
from wander.training.decision_rollout import (
    DecisionRollout,
    LosingLineMistakes,
    branch_depth,
    mistake_positions,
    opponent_variant,
    play_decisions,
    untried_moves,
)
from wander.training.learning_curve import LearningCurveCallback

from .conftest import cpu_args


def scripted_turn(tokenizer, seed: int = 0, choose=None):
    """A 'model' that samples: minimax with random slips, so branches of one group can differ (or `choose`)."""
    choose = choose or MinimaxPlayer(0.5, seed=seed).choose

    def turn(conversations):
        prompts = [tokenizer.apply_chat_template(c, add_generation_prompt=True) for c in conversations]
        texts = [f"<move>{choose(board_of(c))}</move>" for c in conversations]
        completions = [tokenizer.encode(t) + [tokenizer.eos_token_id] for t in texts]
        return prompts, completions, None, texts

    return turn


def test_groups_share_a_prefix_then_branch_and_play_to_the_end(tiny_model):
    env = load_environment("tictactoe", history="current", num_train=64)
    tokenizer = load_tokenizer(tiny_model)
    groups = env.get_dataset("train").select(range(16)).to_list()
    specs = [spec for spec in groups for _ in range(4)]
    samples = play_decisions(env, specs, 4, scripted_turn(tokenizer), max_depth=4)
    assert len(samples) == 64
    depths = {branch_depth(spec, 4) for spec in groups}
    assert depths == {0, 1, 2, 3}  # the seed spreads branch points over the game
    for g in range(16):
        group = samples[4 * g : 4 * g + 4]
        assert len({tuple(s["prompt_ids"]) for s in group}) == 1  # one position per group
        for s in group:
            ep = s["episode"]
            assert ep.done and ep.values and ep.error is None
            # The prompt is the observation of one turn: system + the latest user message, never the history.
            assert tokenizer.decode(s["prompt_ids"]).count("<|im_start|>user") == 1
            assert s["completion_ids"][-1] == tokenizer.eos_token_id
    rewards = [s["episode"].reward for s in samples]
    assert len(set(rewards)) > 1


def test_play_on_plays_every_turn_after_the_branch(tiny_model):
    env = load_environment("tictactoe", history="current", num_train=64)
    tokenizer = load_tokenizer(tiny_model)
    groups = env.get_dataset("train").select(range(16)).to_list()
    specs = [spec for spec in groups for _ in range(4)]
    later: list[int] = []

    def play_on(conversations):  # deterministic: the first value-keeping move
        later.append(len(conversations))
        return [], [], None, [f"<move>{optimal_moves(board_of(c))[0]}</move>" for c in conversations]

    samples = play_decisions(env, specs, 4, scripted_turn(tokenizer), max_depth=4, play_on=play_on)
    assert later and later[0] <= 64  # play_on answered the turns after the branch
    outcomes: dict[tuple, set] = {}
    for i, s in enumerate(samples):  # the opponent replies as a function of (seed, board): so, one outcome
        outcomes.setdefault((i // 4, tuple(s["completion_ids"])), set()).add(s["episode"].reward)
    assert all(len(rewards) == 1 for rewards in outcomes.values())
    assert len(outcomes) > 16  # some groups branched into different moves


def test_expected_play_on_rewards_each_branch_move_by_its_expected_outcome(tiny_model):
    env = load_environment("tictactoe", history="current", num_train=64)
    tokenizer = load_tokenizer(tiny_model)
    groups = env.get_dataset("train").select(range(8)).to_list()
    specs = [spec for spec in groups for _ in range(4)]

    def policy(conversations):  # deterministic: the first value-keeping move
        return [Reply(f"<move>{optimal_moves(board_of(c))[0]}</move>") for c in conversations]

    def expect(branches):
        expect.branches = branches
        return env.expected_outcomes(branches, policy)

    samples = play_decisions(env, specs, 4, scripted_turn(tokenizer), max_depth=4, expect=expect)
    assert len(expect.branches) == 32
    for s, (at_branch, reply) in zip(samples, expect.branches, strict=True):
        ep = s["episode"]
        assert reply.content == ep.replies[-1].content and len(at_branch.replies) == len(ep.replies) - 1
        assert set(ep.values) >= {"win", "draw", "loss", "move_optimality"}
    for s, (at_branch, reply) in list(zip(samples, expect.branches, strict=True))[::4]:
        ep = s["episode"]
        # The reward is the mean over many games that play this move, then the greedy policy, to the end.
        games = []
        for seed in range(400):
            game = at_branch.fork()
            game.state["seed"] = seed
            env.advance(game, reply)
            while not game.done:
                env.advance(game, policy([env.observation(game)])[0])
            games.append(game)
        env.score(games)
        sampled = sum(g.reward for g in games) / len(games)
        assert abs(ep.reward - sampled) < 0.12, (ep.reward, sampled)  # ~5 standard errors


def test_explore_replaces_the_last_samples_of_a_group_by_untried_legal_moves(tiny_model):
    env = load_environment("tictactoe", history="current")
    tokenizer = load_tokenizer(tiny_model)
    explore = untried_moves(env, tokenizer, 0.5)
    episode = env.start({"seed": 3, "random_move_prob": 0.5, "stratum": 0, "model_starts": True})
    texts = ["<move>4</move>", "<move>0</move>", "<move>4</move>", "<move>4</move>"]
    ids = [tokenizer.encode(t, add_special_tokens=False) + [tokenizer.eos_token_id] for t in texts]
    out_texts, out_ids = explore(episode, list(texts), list(ids))
    assert out_texts[:2] == texts[:2] and out_ids[:2] == ids[:2]  # the sampled half stays
    assert len(set(out_texts[2:])) == 2 and not set(out_texts[2:]) & {"<move>4</move>", "<move>0</move>"}
    assert [tokenizer.decode(i, skip_special_tokens=True) for i in out_ids] == out_texts
    assert explore(episode, list(texts), list(ids)) == (out_texts, out_ids)  # seeded by the episode


def test_explored_moves_are_the_moves_played(tiny_model):
    env = load_environment("tictactoe", history="current", num_train=64)
    tokenizer = load_tokenizer(tiny_model)
    groups = env.get_dataset("train").select(range(8)).to_list()
    specs = [spec for spec in groups for _ in range(4)]
    samples = play_decisions(
        env,
        specs,
        4,
        scripted_turn(tokenizer),
        max_depth=4,
        expect=lambda branches: [{"reward": 0.0} for _ in branches],  # stop at the branch move
        explore=untried_moves(env, tokenizer, 0.5),
    )
    for g in range(8):
        group = samples[4 * g : 4 * g + 4]
        moves = [tokenizer.decode(s["completion_ids"], skip_special_tokens=True) for s in group]
        assert [s["episode"].replies[-1].content for s in group] == moves
        assert not set(moves[2:]) & set(moves[:2]) or len(set(moves)) == len(set(moves[:2]))


def lowest_cell(board: str) -> int:
    """A deterministic player that takes the lowest free cell: it misses wins and blocks."""
    return legal_moves(board)[0]


def first_cell(conversations):
    """`lowest_cell` as a policy."""
    return [Reply(f"<move>{lowest_cell(board_of(c))}</move>") for c in conversations]


def test_mistake_positions_find_where_greedy_play_loses_the_most_reward():
    env = load_environment("tictactoe", history="current", num_train=64)
    specs = env.get_dataset("train").select(range(8)).to_list()
    found = mistake_positions(env, specs, first_cell, tries=3)
    assert len(found) == 8 and all(at is not None and loss > 0 for at, loss in found)
    for spec, (at, loss) in zip(specs, found, strict=True):
        assert not at.done and at.spec["random_move_prob"] == spec["random_move_prob"]
        assert at.spec["seed"] in {opponent_variant(spec, k)["seed"] for k in range(3)}
        # The loss is the reward the player's own move gives up against the best candidate, with best play after.
        own = first_cell([env.observation(at)])[0]
        replies = [own] + [Reply(c) for c in env.candidate_replies(at)]
        rewards = [o["reward"] for o in env.best_outcomes([(at, r) for r in replies])]
        assert loss == pytest.approx(max(rewards[1:]) - rewards[0])
        # No position of the same games costs more: replay them and value every move.
        for k in range(3):
            game = env.start(opponent_variant(spec, k))
            while not game.done:
                move = first_cell([env.observation(game)])[0]
                outs = env.best_outcomes(
                    [(game, r) for r in [move] + [Reply(c) for c in env.candidate_replies(game)]]
                )
                assert max(o["reward"] for o in outs[1:]) - outs[0]["reward"] <= loss + 1e-9
                env.advance(game, move)
    assert opponent_variant(specs[0], 0) is specs[0] and opponent_variant(specs[0], 1) == opponent_variant(
        specs[0], 1
    )


def test_a_player_that_makes_no_mistake_leaves_every_group_to_its_seeded_prefix(tiny_model):
    env = load_environment("tictactoe", history="current", random_move_prob=[0.0, 0.0], num_train=64)
    specs = env.get_dataset("train").select(range(8)).to_list()

    def best(conversations):  # the env's own best play against this opponent (skill 0)
        return [Reply(f"<move>{best_move(board_of(c), 0.0)}</move>") for c in conversations]

    assert mistake_positions(env, specs, best, tries=2) == [(None, 0.0)] * 8
    # Groups given a position answer it; the others branch after their seeded prefix, as without `found`.
    tokenizer = load_tokenizer(tiny_model)
    at, _ = mistake_positions(env, specs[:1], first_cell, tries=1)[0]
    grouped = [spec for spec in specs[:2] for _ in range(4)]
    turn = scripted_turn(tokenizer, choose=lowest_cell)
    samples = play_decisions(env, grouped, 4, turn, found=[at, None])
    plain = play_decisions(env, grouped, 4, turn)
    position = tokenizer.apply_chat_template(env.observation(at), add_generation_prompt=True)
    assert all(s["prompt_ids"] == position for s in samples[:4])
    assert [s["prompt_ids"] for s in samples[4:]] == [s["prompt_ids"] for s in plain[4:]]


@pytest.mark.parametrize(
    ("setting", "capability", "member"),
    [
        ({"play_on": "expected"}, "ExpectedOutcomes", "expected_outcomes"),
        ({"play_on": "best"}, "BestOutcomes", "best_outcomes"),
        ({"explore": 0.5}, "CandidateReplies", "candidate_replies"),
        ({"branch_at": "mistake"}, "BestOutcomes", "best_outcomes"),
        ({"branch_at": "adversary"}, "BestOutcomes", "best_outcomes"),
    ],
)
def test_a_rollout_that_needs_a_capability_names_it_when_the_env_lacks_it(setting, capability, member):
    # reverse_text cannot enumerate its randomness, solve itself or list its replies: refused before training,
    # naming the protocol, its method and what to do instead.
    with pytest.raises(MissingCapability) as refused:
        DecisionRollout(load_environment("reverse_text"), **setting)
    message = str(refused.value)
    assert f"the {capability} capability" in message and f"`{member}`" in message
    assert "'reverse_text' does not have it: " in message and (
        "use play_on=" in message or "explore to 0" in message or "use branch_at='depth'" in message
    )
    rollout = DecisionRollout(load_environment("tictactoe"), **setting)  # tic-tac-toe opts into all of them
    assert (rollout.play_on, rollout.explore, rollout.branch_at) == (
        setting.get("play_on", "sample"),
        setting.get("explore", 0.0),
        setting.get("branch_at", "depth"),
    )
    assert DecisionRollout(load_environment("reverse_text")).play_on == "sample"  # sampled play-on needs none


def decision_trainer(sft_model, tmp_path, explore: float = 0.5, branch_at: str = "depth"):
    """A 2-step GRPO trainer on a current-history env (decision rollouts), from the short SFT model."""
    from trl import GRPOConfig, GRPOTrainer

    env = load_environment("tictactoe", history="current", num_groups=2, num_train=64)
    args = cpu_args(
        GRPOConfig,
        str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=16,
        num_generations=4,
        max_completion_length=16,
        learning_rate=1e-3,
        temperature=1.5,  # the short SFT start is sharp; groups need some spread
    )
    # Half of each group plays moves the group did not sample: the short SFT start may make every sampled move
    # invalid (on some CPUs it does), and a group whose samples all score alike gives no gradient.
    rollout = RolloutConfig(explore=explore, branch_at=branch_at)
    return env, env >> trainer_spec(GRPOTrainer, model=sft_model, args=args, rollout=rollout)


@pytest.mark.parametrize("branch_at", ["depth", "mistake", "adversary"])
def test_grpo_on_a_current_history_env_trains_single_decisions(sft_model, tmp_path, branch_at):
    env, trainer = decision_trainer(sft_model, tmp_path, branch_at=branch_at)
    assert isinstance(trainer.rollout_func, DecisionRollout)
    curve = LearningCurveCallback(env, trainer, every=2)
    trainer.add_callback(curve)
    rollouts = []
    inner = trainer.rollout_func
    trainer.rollout_func = lambda prompts, t: rollouts.append(inner(prompts, t)) or rollouts[-1]
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.train()
    assert any(not torch.equal(v, before[k]) for k, v in trainer.model.state_dict().items())
    assert any("rewards/episode/mean" in h for h in trainer.state.log_history)
    # The learning curve: the start model at step 0, then every 2 steps, as logged metrics.
    points = curve_points(trainer.state.log_history)
    assert [p["step"] for p in points] == [0, 2] == [h["step"] for h in curve.history]
    for point in points:
        assert 0.0 <= point["random/win"] <= 1.0 and 0.0 <= point["minimax-0/loss"] <= 1.0
        assert point["random/win"] + point["random/loss"] <= 1.0 + 1e-9
    for out in rollouts:
        assert all(set(mask) == {1} for mask in out["env_mask"])  # a sample is one model turn, no env tokens
        assert all(len(ids) <= 16 for ids in out["completion_ids"])
    # Mistake branching logs how many groups found a mistake of the greedy model and what it cost.
    logged = [h for h in trainer.state.log_history if "branch/mistake_share" in h]
    assert len(logged) == (0 if branch_at == "depth" else 2)
    assert all(0.0 <= h["branch/mistake_share"] <= 1.0 and h["branch/mistake_loss"] >= 0.0 for h in logged)
    # Adversary branching also logs the share of groups sent to the lines that beat the model.
    on_lines = [h["branch/losing_line_share"] for h in logged if "branch/losing_line_share" in h]
    assert len(on_lines) == (2 if branch_at == "adversary" else 0) and all(0.0 <= s <= 1.0 for s in on_lines)


class Fixed:
    """A deterministic player: blocks before it wins (beatable), or, once `fixed`, the first value-keeping move."""

    def __init__(self):
        self.fixed, self.asked = False, 0

    def __call__(self, conversations):
        self.asked += len(conversations)
        moves = []
        for c in conversations:
            board = board_of(c)
            blocks = [m for m in legal_moves(board) if not self.fixed and m in _blocks(board)]
            moves.append(blocks[0] if blocks else optimal_moves(board)[0])
        return [Reply(f"<move>{m}</move>") for m in moves]


def _blocks(board: str) -> list[int]:
    from envs.tictactoe.board import play, to_move, winner

    other = "O" if to_move(board) == "X" else "X"
    return [c for c in legal_moves(board) if winner(play(board, c, other)) == other]


def test_adversary_groups_go_to_the_mistakes_on_the_lines_that_beat_the_model():
    env = load_environment("tictactoe", history="current")
    policy = Fixed()
    lines = LosingLineMistakes(env)
    mistakes = lines(policy)
    assert mistakes and [loss for _, loss in mistakes] == sorted((loss for _, loss in mistakes), reverse=True)
    for at, loss in mistakes:  # a position of a losing line where the player's own move gives up value
        assert any(at.state["board"] == p.state["board"] for p in env.losing_positions(policy)) and loss > 0
        assert int(policy([env.observation(at)])[0].content[6]) not in optimal_moves(at.state["board"])
    # The next call asks the model only those positions again, not the whole worst case.
    before = policy.asked
    assert [at.state["board"] for at, _ in lines(policy)] == [at.state["board"] for at, _ in mistakes]
    assert policy.asked - before <= len(lines.positions)
    # Fixed there (a new model: each step's is), the lines are looked for again; a model no line beats leaves
    # every group to its own games, and the pool keeps what the searches found.
    pool = [at.state["board"] for at in lines.positions]
    fixed = Fixed()
    fixed.fixed = True
    assert lines(fixed) == [] and [at.state["board"] for at in lines.positions] == pool
    # A model that errs there again is sent back to the pooled positions with no new search.
    again = Fixed()
    assert [at.state["board"] for at, _ in lines(again)] == [at.state["board"] for at, _ in mistakes]
    assert again.asked <= len(pool)


def test_keep_best_leaves_the_best_curve_point_in_the_model(sft_model, tmp_path):
    env, trainer = decision_trainer(sft_model, tmp_path)
    scores = iter([1.0, 0.5, 0.0])  # the start model scores best, then worse at every point
    env.curve_score = lambda values: next(scores)
    curve = LearningCurveCallback(env, trainer, every=1, keep_best=True)
    trainer.add_callback(curve)
    start = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.train()
    assert [h["step"] for h in curve.history] == [0, 1, 2]
    assert [h["curve/score"] for h in curve.history] == [1.0, 0.5, 0.0]
    assert all(torch.equal(v, start[k]) for k, v in trainer.model.state_dict().items())  # back to step 0
    kept = [h for h in trainer.state.log_history if "curve_best/step" in h]
    assert kept[-1]["curve_best/step"] == 0 and kept[-1]["curve_best/score"] == 1.0
    assert sorted(p.name for p in (tmp_path / "curve_best").iterdir()) == ["best.json", "model.safetensors"]
    assert [p["step"] for p in curve_points(trainer.state.log_history)] == [0, 1, 2]  # no extra curve point


@pytest.mark.parametrize(
    ("beaten", "steps"), [([True, False], [0, 1]), ([False], [0, 1]), ([True, True, True], [0, 1, 2])]
)
def test_until_unbeaten_ends_a_stage_after_the_first_point_no_line_beats(sft_model, tmp_path, beaten, steps):
    env, trainer = decision_trainer(sft_model, tmp_path)
    points = list(beaten)  # each point's answer, the last one repeated
    # Each curve point asks the env for the lines that beat the model: here beaten, then not (or never).
    env.losing_positions = lambda policy: (
        [env.start(env.get_dataset("train")[0])] if (points.pop(0) if len(points) > 1 else points[0]) else []
    )
    curve = LearningCurveCallback(env, trainer, every=1, keep_best=True, until_unbeaten=True)
    trainer.add_callback(curve)
    trainer.train()
    # A start no line beats still trains one step (the trainer checks a stop after a step), then stops.
    assert [h["step"] for h in curve.history] == steps and trainer.state.global_step == steps[-1]
    assert curve.unbeaten is (not beaten[-1])


def test_until_unbeaten_is_refused_where_the_env_cannot_name_a_losing_line():
    with pytest.raises(MissingCapability, match="the LosingLines capability.*set it false"):
        LearningCurveCallback(load_environment("reverse_text"), None, every=1, until_unbeaten=True)


def test_a_start_point_measured_before_is_step_0_without_asking_the_model_again(sft_model, tmp_path):
    env, trainer = decision_trainer(sft_model, tmp_path)
    measured = []
    curve_metrics = env.curve_metrics
    env.curve_metrics = lambda policy: measured.append(trainer.state.global_step) or curve_metrics(policy)
    start = {"step": 4, "random/win": 0.5, "score": 0.25}  # an earlier stage's kept point
    curve = LearningCurveCallback(env, trainer, every=1, keep_best=True, start=start)
    trainer.add_callback(curve)
    trainer.train()
    assert measured == [1, 2]  # step 0 came from the earlier stage
    assert curve.history[0] == {"step": 0, "curve/random/win": 0.5, "curve/score": 0.25, "curve/seconds": 0.0}
    assert [p["step"] for p in curve_points(trainer.state.log_history)] == [0, 1, 2]
