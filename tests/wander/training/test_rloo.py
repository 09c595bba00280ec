"""RLOO through reward functions: single-turn envs train; multi-turn envs get a clear error."""

from __future__ import annotations

import pytest

from wander import load_environment
from wander.training import trainer_spec

from .conftest import cpu_args


def test_multi_turn_env_is_refused_with_the_reason_and_the_alternative(env, tiny_model, tmp_path):
    from trl import RLOOConfig, RLOOTrainer

    args = cpu_args(RLOOConfig, str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=2)
    with pytest.raises(ValueError, match="multi-turn") as error:
        env >> trainer_spec(RLOOTrainer, model=tiny_model, args=args)
    assert "GRPOTrainer" in str(error.value) and "rollout_func" in str(error.value)


@pytest.mark.slow
def test_single_turn_env_trains_a_step_with_its_rubric_as_reward_functions(sft_model, tmp_path):
    from trl import RLOOConfig, RLOOTrainer

    one_move = load_environment("tictactoe", max_turns=1, num_groups=2, num_train=64)
    assert one_move.is_single_turn
    args = cpu_args(
        RLOOConfig,
        str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=16,
    )
    trainer = one_move >> trainer_spec(RLOOTrainer, model=sft_model, args=args)
    trainer.train()
    assert trainer.state.global_step == 1
    logged = trainer.state.log_history[0]
    for name in ["episode", *one_move.rubric.names]:
        assert f"rewards/{name}/mean" in logged
    assert logged["rewards/turns/mean"] == 1.0  # scored as one-move episodes by the env's own code
