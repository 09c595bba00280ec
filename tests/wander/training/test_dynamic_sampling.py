"""Dynamic sampling: a flat GRPO group (every sample the same reward) is replaced by a group of a fresh spec, up to
its rounds, the shares logged; then a real GRPO run on the tiny model with it on."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import pytest

from wander.training import RolloutConfig, trainer_spec
from wander.training.dynamic_sampling import FlatGroupResampling, groups_of
from wander.training.episode_data import dump_spec, episode_prompt, spec_of

from .conftest import cpu_args

G = 4  # samples per group


def seed_rollout(flat_seeds: set[int], calls: list[list[dict]]):
    """A rollout whose rewards depend on the spec: every sample of a spec in `flat_seeds` gets 0 (a flat group),
    the others 0, 1, 0, 1 (spread); it records the specs of each call."""

    def rollout(prompts, trainer):
        specs = [spec_of(p) for p in prompts]
        calls.append(specs)
        rewards = [0.0 if s["seed"] in flat_seeds else float(i % 2) for i, s in enumerate(specs)]
        return {
            "prompt_ids": [[s["seed"]] for s in specs],
            "completion_ids": [[s["seed"], i] for i, s in enumerate(specs)],
            "logprobs": None,
            "episode_reward": rewards,
            "episode_values": [{"r": r} for r in rewards],
        }

    return rollout


def trainer_stub() -> SimpleNamespace:
    """What a rollout_func reads of the trainer here: its process count and TRL's metric lists."""
    return SimpleNamespace(
        accelerator=SimpleNamespace(num_processes=1), _metrics={"train": defaultdict(list)}
    )


def batch(env, specs: list[dict]) -> list:
    return [episode_prompt(env, spec, spec_in_prompt=True) for spec in specs for _ in range(G)]


def test_a_flat_group_is_replaced_by_a_fresh_spec_with_spread_and_the_shares_are_logged(env):
    train = [dict(s) for s in env.get_dataset("train")]
    specs = train[:4]
    prompts = batch(env, specs)
    calls: list[list[dict]] = []
    # Groups 1 and 3 are flat; so is the first fresh spec drawn, which needs a second round.
    order = FlatGroupResampling(seed_rollout(set(), []), env, rounds=1, seed=5)._next_spec
    first_fresh = order({dump_spec(s) for s in specs})
    flat = {specs[1]["seed"], specs[3]["seed"], first_fresh["seed"]}
    trainer = trainer_stub()
    out = FlatGroupResampling(seed_rollout(flat, calls), env, rounds=2, seed=5)(prompts, trainer)

    assert [len(c) for c in calls] == [16, 8, 4]  # the batch, two flat groups, the one still flat
    assert dump_spec(calls[1][0]) == dump_spec(first_fresh) and first_fresh["seed"] not in {
        s["seed"] for s in specs
    }
    replaced = [out["prompt_ids"][g[0]][0] for g in groups_of(prompts)]
    assert replaced[0] == specs[0]["seed"] and replaced[2] == specs[2]["seed"]  # groups with spread stay
    assert replaced[1] != specs[1]["seed"] and replaced[3] != specs[3]["seed"]
    assert len({*replaced}) == 4 and not {*replaced} & {
        specs[1]["seed"],
        specs[3]["seed"],
        first_fresh["seed"],
    }
    for g in groups_of(prompts):  # every group now has spread, its samples the new group's own
        rewards = [out["episode_reward"][i] for i in g]
        assert max(rewards) > min(rewards)
        assert [out["episode_values"][i]["r"] for i in g] == rewards
    assert out["logprobs"] is None and len(out["completion_ids"]) == 16
    metrics = trainer._metrics["train"]
    assert metrics["dynamic/flat_share"] == [0.5] and metrics["dynamic/replaced_share"] == [0.5]
    assert metrics["dynamic/still_flat_share"] == [0.0]


def test_a_group_still_flat_after_the_last_round_stays_flat_and_is_counted(env):
    specs = [dict(s) for s in env.get_dataset("train")][:2]
    everything = {int(s["seed"]) for s in env.get_dataset("train")}
    trainer = trainer_stub()
    calls: list[list[dict]] = []
    out = FlatGroupResampling(seed_rollout(everything, calls), env, rounds=2)(batch(env, specs), trainer)
    assert [len(c) for c in calls] == [8, 8, 8] and out["episode_reward"] == [0.0] * 8
    assert out["prompt_ids"][::G] == [
        [s["seed"]] for s in specs
    ]  # the batch's own groups stay, as flat as any
    assert trainer._metrics["train"]["dynamic/still_flat_share"] == [1.0]


def test_refusals_say_what_to_change(env):
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        FlatGroupResampling(seed_rollout(set(), []), env, rounds=0)
    with pytest.raises(ValueError, match="resample_flat with branch_at='mistake'"):
        RolloutConfig(resample_flat=1, branch_at="mistake")
    with pytest.raises(ValueError, match="resample_flat must be 0"):
        RolloutConfig(resample_flat=-1)
    two = SimpleNamespace(accelerator=SimpleNamespace(num_processes=2), _metrics={"train": defaultdict(list)})
    with pytest.raises(ValueError, match="runs on one process"):
        FlatGroupResampling(seed_rollout(set(), []), env, rounds=1)(batch(env, []), two)


def test_grpo_with_resampling_trains_and_logs_the_shares(env, sft_model, tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    args = cpu_args(
        GRPOConfig,
        str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=16,
        num_generations=G,
        max_completion_length=32,
        learning_rate=1e-3,
    )
    rollout = RolloutConfig(resample_flat=2)
    trainer = env >> trainer_spec(GRPOTrainer, model=sft_model, args=args, rollout=rollout)
    assert isinstance(trainer.rollout_func, FlatGroupResampling)
    played = []
    inner = trainer.rollout_func.rollout
    trainer.rollout_func.rollout = lambda prompts, t: played.append(len(prompts)) or inner(prompts, t)
    trainer.train()
    logged = [h for h in trainer.state.log_history if "dynamic/flat_share" in h]
    assert len(logged) == 2
    for h in logged:
        assert 0.0 <= h["dynamic/still_flat_share"] <= h["dynamic/flat_share"] <= 1.0, h
        assert h["dynamic/replaced_share"] == pytest.approx(
            h["dynamic/flat_share"] - h["dynamic/still_flat_share"]
        )
    # The batches and the replays of whole flat groups: a multiple of the group size each.
    assert played[0] == 16 and len(played) >= 2 and all(n % G == 0 for n in played)
