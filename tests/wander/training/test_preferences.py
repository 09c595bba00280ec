"""Preference pairs from groups of rollouts, and env >> DPOTrainer."""

from __future__ import annotations

import pytest
import torch

from wander.core.episode import Episode
from wander.training import trainer_spec
from wander.training.preferences import preference_pair, preference_pairs
from wander.training.preferences_config import PreferenceConfig

from .conftest import cpu_args

SYSTEM = {"role": "system", "content": "play"}
BOARD = {"role": "user", "content": "board 1"}


def episode(reward: float, *moves: str) -> Episode:
    messages = [SYSTEM, BOARD]
    for i, move in enumerate(moves):
        messages += [{"role": "assistant", "content": move}, {"role": "user", "content": f"board {i + 2}"}]
    return Episode(spec={"seed": 1}, messages=messages[:-1], state={}, prompt_len=2, reward=reward)


def test_pairs_take_the_best_and_worst_of_each_group_at_their_first_different_turn():
    group = [episode(0.5, "a", "b"), episode(1.0, "a", "c"), episode(0.0, "a", "d"), episode(0.0, "e")]
    [pair] = preference_pairs([group])
    # Best (1.0) against the first of the worst (0.0, stable order): same prompt up to turn 2.
    assert pair["prompt"] == [
        SYSTEM,
        BOARD,
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "board 2"},
    ]
    assert pair["chosen"] == [{"role": "assistant", "content": "c"}]
    assert pair["rejected"] == [{"role": "assistant", "content": "d"}]
    whole = preference_pair(group[1], group[3], mode="episode")
    assert whole["prompt"] == [SYSTEM, BOARD] and whole["chosen"] == group[1].completion


def test_groups_without_a_reward_gap_make_no_pair():
    assert preference_pairs([[episode(1.0, "a"), episode(1.0, "b")]]) == []
    assert preference_pairs([[episode(1.0, "a"), episode(0.9, "b")]], min_reward_gap=0.2) == []
    # Identical turns leave nothing to prefer.
    assert preference_pairs([[episode(1.0, "a"), episode(0.0, "a")]]) == []


@pytest.mark.slow
def test_dpo_composition_builds_pairs_from_the_models_rollouts_and_trains_a_step(env, sft_model, tmp_path):
    from trl import DPOConfig, DPOTrainer

    args = cpu_args(DPOConfig, str(tmp_path), max_steps=1, per_device_train_batch_size=4, learning_rate=1e-3)
    config = PreferenceConfig(num_prompts=8, group_size=4, max_new_tokens=16, seed=0)
    trainer = env >> trainer_spec(DPOTrainer, model=sft_model, args=args, preferences=config)
    pairs = trainer.train_dataset
    assert 1 <= len(pairs) <= 8
    for row in pairs:
        assert row["prompt"][-1]["role"] == "user"
        assert row["chosen"][0]["role"] == row["rejected"][0]["role"] == "assistant"
        assert row["chosen"] != row["rejected"]
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.train()
    assert trainer.state.global_step == 1
    assert any(not torch.equal(v, before[k]) for k, v in trainer.model.state_dict().items())
